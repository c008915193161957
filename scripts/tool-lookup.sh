# Sourced, not run: how install-oxia.sh and install-versitygw.sh look for their server binary
# and report that it is missing. The sourcing script sets TOOL (the binary's name), TOOL_VAR
# (the variable that may name the binary, e.g. OXIA_BIN) and TOOL_TITLE (the tool as the
# failure message names it), and defines how_to_get_it, the advice lines of that message.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS_BIN="$ROOT/.tools/bin"
REASON_FILE="$ROOT/.tools/$TOOL-unavailable"
mkdir -p "$TOOLS_BIN"

# The reason goes to $REASON_FILE, which the test suite and `make dev` report.
unavailable() {
  printf '%s\n' "$1" > "$REASON_FILE"
  {
    printf '\n*** %s is not available: %s\n' "$TOOL_TITLE" "$1"
    how_to_get_it
    printf '\n'
  } >&2
  exit 3
}

found() {
  rm -f "$REASON_FILE"
  echo "$TOOL: $1"
  exit 0
}

# The first two places looked in: the binary $TOOL_VAR names (an error if it is not
# executable), then PATH. Returns only if neither has the tool.
find_named_or_on_path() {
  local named=${!TOOL_VAR:-}
  if [ -n "$named" ]; then
    [ -x "$named" ] && found "$named ($TOOL_VAR)"
    unavailable "$TOOL_VAR=$named is not an executable file"
  fi
  if command -v "$TOOL" >/dev/null 2>&1; then found "$(command -v "$TOOL") (PATH)"; fi
}
