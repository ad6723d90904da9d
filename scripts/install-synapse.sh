#!/usr/bin/env bash
# Installs the Synapse homeserver that the chat tests and `dagbot demo` run, into a Python venv
# outside the work tree. Idempotent: returns at once when the pinned version is already there.
#
#   DAGBOT_SYNAPSE_VENV  venv folder (default: ${XDG_CACHE_HOME:-~/.cache}/dagbot/synapse-venv)
#   DAGBOT_PYTHON        interpreter used to create the venv (default: python3)
#
# Prints the venv's python path on the last line of stdout; progress goes to stderr.
set -euo pipefail

# Pinned exactly so every machine runs the Synapse the test config was validated against
# (the rc_* keys in src/harness/synapse-config.ts were checked against this release).
SYNAPSE_VERSION="1.163.2"

venv="${DAGBOT_SYNAPSE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dagbot/synapse-venv}"
python="${DAGBOT_PYTHON:-python3}"
venv_python="$venv/bin/python"

installed_version() {
  "$venv_python" -c 'import importlib.metadata as m; print(m.version("matrix-synapse"))' 2>/dev/null || true
}

if [[ -x "$venv_python" && "$(installed_version)" == "$SYNAPSE_VERSION" ]]; then
  echo "$venv_python"
  exit 0
fi

if ! command -v "$python" >/dev/null 2>&1; then
  echo "install-synapse: '$python' was not found. The Matrix tests need Python >= 3.10 with pip and venv" >&2
  echo "install-synapse: (Debian: apt-get install python3 python3-venv python3-pip), or set DAGBOT_PYTHON." >&2
  exit 2
fi
if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)'; then
  echo "install-synapse: $("$python" --version 2>&1) is too old; Synapse $SYNAPSE_VERSION needs Python >= 3.10." >&2
  exit 2
fi
if ! "$python" -m venv --help >/dev/null 2>&1; then
  echo "install-synapse: '$python -m venv' is missing (Debian: apt-get install python3-venv)." >&2
  exit 2
fi

mkdir -p "$(dirname "$venv")"
# Test workers may call this at the same moment on a clean machine: one installs, the others wait.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$venv.lock"
  flock 9
  if [[ -x "$venv_python" && "$(installed_version)" == "$SYNAPSE_VERSION" ]]; then
    echo "$venv_python"
    exit 0
  fi
fi

echo "install-synapse: installing matrix-synapse==$SYNAPSE_VERSION and about 60 Python packages (~240 MB) into $venv;" >&2
echo "install-synapse: the first time takes a few minutes (pip names each package as it goes)" >&2
if [[ ! -x "$venv_python" ]]; then
  if ! "$python" -m venv "$venv" >&2; then
    echo "install-synapse: could not create a venv at $venv (Debian: apt-get install python3-venv python3-pip)." >&2
    exit 2
  fi
fi
if ! "$venv_python" -m pip --version >/dev/null 2>&1; then
  # Some distributions ship venv without ensurepip's wheels; pip is then truly missing.
  echo "install-synapse: pip is not available in the venv at $venv (Debian: apt-get install python3-pip python3-venv)." >&2
  exit 2
fi
# Not --quiet: pip's "Collecting …" / "Installing collected packages" lines are the progress.
"$venv_python" -m pip install --progress-bar off --disable-pip-version-check "matrix-synapse==$SYNAPSE_VERSION" >&2

if [[ "$(installed_version)" != "$SYNAPSE_VERSION" ]]; then
  echo "install-synapse: pip finished but matrix-synapse $SYNAPSE_VERSION is not importable from $venv" >&2
  exit 1
fi
echo "install-synapse: done" >&2
echo "$venv_python"
