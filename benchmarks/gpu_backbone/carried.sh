# Sourced by device.sh and teacher.sh on the lent GPU machine: check the files the copy calls
# carried to $X (sums.txt) and, if its python lacks pydantic, install the carried wheels into
# /tmp/site.  Usage: carried_check NAME (NAME prefixes the messages; exits on a failure).
carried_check() {
  (cd "$X" && sha256sum --quiet -c sums.txt) || { echo "$1: a carried file is missing or damaged"; exit 3; }
  if ! python3 -c "import pydantic" 2>/dev/null; then
    ls "$X"/whl/*.whl >/dev/null 2>&1 || { echo "$1: no pydantic there and no wheels carried"; exit 3; }
    rm -rf /tmp/site
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$X"/whl/*.whl || exit 3
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    python3 -c "import pydantic" || { echo "$1: the carried wheels do not give pydantic"; exit 3; }
    echo "installed the carried wheels"
  fi
}
