# Sourced by the other scripts: make .venv (Python >= 3.11) and install coffre with its test tools.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ ! -x .venv/bin/python ]; then
  PY=""
  for candidate in "${PYTHON:-}" python3.11 python3.12 python3.13 python3; do
    if [ -n "$candidate" ] && command -v "$candidate" >/dev/null 2>&1 \
       && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      PY=$candidate; break
    fi
  done
  [ -n "$PY" ] || { echo "coffre needs Python 3.11 or newer" >&2; exit 1; }
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
.venv/bin/python -m pip install -q -e ".[test]"
