#!/bin/sh
# Test fixture: ignores SIGTERM (its children inherit that) and starts two children, writing every pid
# to the file named by $1, so only a SIGKILL to the whole process group can stop the lot.
trap '' TERM
sleep 1000 &
echo $! >> "$1"
sleep 1000 &
echo $! >> "$1"
echo $$ >> "$1"
echo ready
wait
