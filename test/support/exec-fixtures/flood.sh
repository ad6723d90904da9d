#!/bin/sh
# Test fixture: writes $1 bytes of "x" to stdout, then the marker <END>, as fast as the pipe allows.
head -c "$1" /dev/zero | tr '\000' 'x'
printf '<END>'
