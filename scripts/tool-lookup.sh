# Sourced, not run: how the install scripts (Oxia, VersityGW, aws-lambda-rie, llog-lincheck) look for their binary
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

# The module version a Go binary was built from ("" if unknown: no Go, or not a Go binary).
built_version() {
  command -v go >/dev/null 2>&1 || return 0
  go version -m "$1" 2>/dev/null | awk -v m="$MODULE" '$1 == "mod" && $2 == m { print $3 }'
}

# The rest of the lookup for a tool go-installed from $MODULE/$1 at version $2 ($3: how long that
# takes, for the progress line): .tools/bin/$TOOL if it was built at that version (or its version
# cannot be told: no Go to replace it with anyway), else `go install` it there.
find_or_go_install() {
  local package=$MODULE/$1 version=$2 lasts=$3
  if [ -x "$TOOLS_BIN/$TOOL" ]; then
    local have
    have=$(built_version "$TOOLS_BIN/$TOOL")
    if [ -z "$have" ] || [ "$have" = "$version" ]; then found "$TOOLS_BIN/$TOOL"; fi
    echo "$TOOL: .tools/bin/$TOOL is $have, not $version: reinstalling" >&2
  fi
  command -v go >/dev/null 2>&1 || unavailable "Go is not installed (needed once, to install it into .tools/bin)"
  echo "$TOOL: installing $package@$version into .tools/bin ($lasts, once)" >&2
  if ! GOBIN="$TOOLS_BIN" go install "$package@$version"; then
    unavailable "go install $package@$version failed (output above; is the Go module proxy reachable?)"
  fi
  [ -x "$TOOLS_BIN/$TOOL" ] || unavailable "go install succeeded but left no $TOOLS_BIN/$TOOL"
  found "$TOOLS_BIN/$TOOL (installed)"
}
