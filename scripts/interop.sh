#!/usr/bin/env bash
# The interop corpora the tests run unmodified: zot's example extensions and Claude Code's
# official plugins (../shared/interop/README.md says what each holds and its license). Each is
# taken, in order, from:
#   1. $YEP_ZOT_INTEROP / $YEP_CLAUDE_INTEROP, when set;
#   2. ../shared/interop/{zot,claude-plugins} beside the checkout (CI has it there);
#   3. a clone of its pinned commit into <peers>/interop/, made once: a clone of the repository
#      from GitHub has no ../shared. Only the paths the tests read are checked out.
# Prints `YEP_ZOT_INTEROP=<dir>` and `YEP_CLAUDE_INTEROP=<dir>`, one a line.
#   scripts/interop.sh <peers dir>
# The clone's sources can be overridden (a mirror, or a test's local bare repository):
# YEP_ZOT_GIT, YEP_ZOT_COMMIT, YEP_CLAUDE_PLUGINS_GIT, YEP_CLAUDE_PLUGINS_COMMIT; and
# YEP_SHARED_INTEROP names another ../shared/interop.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
peers="${1:?usage: scripts/interop.sh <peers dir>}"
shared="${YEP_SHARED_INTEROP:-$root/../shared/interop}"

zot_git="${YEP_ZOT_GIT:-https://github.com/patriceckhart/zot}"
zot_commit="${YEP_ZOT_COMMIT:-380eca96154221196adc96794abfd305246e3bd8}" # v0.1.62
zot_paths=(LICENSE examples/extensions pkg/zotext internal/extproto)
claude_git="${YEP_CLAUDE_PLUGINS_GIT:-https://github.com/anthropics/claude-plugins-official}"
claude_commit="${YEP_CLAUDE_PLUGINS_COMMIT:-340e33aef211d95769d252324854497af871dafe}"
claude_paths=(.claude-plugin plugins/example-plugin plugins/explanatory-output-style
  plugins/learning-output-style plugins/commit-commands plugins/security-guidance
  plugins/code-review plugins/rust-analyzer-lsp)

say() { echo "scripts/interop.sh: $*" >&2; }

# clone <dir> <repository> <commit> <path>...: <dir> holds <commit>'s <path>s, cloned once.
clone() {
  local dir="$1" repo="$2" commit="$3"
  shift 3
  if [[ "$(git -C "$dir" rev-parse HEAD 2>/dev/null)" == "$commit" ]]; then
    return 0
  fi
  say "cloning $repo at ${commit:0:12} into $dir (once)"
  local fresh="$dir.new-$$"
  rm -rf "$fresh"
  mkdir -p "$(dirname "$dir")"
  git init -q "$fresh"
  git -C "$fresh" sparse-checkout set --no-cone "$@"
  # The commit alone where the server gives it by hash (GitHub does); else the whole history.
  if ! git -C "$fresh" fetch -q --depth 1 "$repo" "$commit" 2>/dev/null; then
    git -C "$fresh" fetch -q "$repo" || { say "could not fetch $repo"; rm -rf "$fresh"; return 1; }
  fi
  git -C "$fresh" -c advice.detachedHead=false checkout -q "$commit" \
    || { say "$repo has no commit $commit"; rm -rf "$fresh"; return 1; }
  rm -rf "$dir"
  mv "$fresh" "$dir"
}

# corpus <variable> <folder> <repository> <commit> <path>...: the line for <variable>.
corpus() {
  local var="$1" folder="$2" repo="$3" commit="$4"
  shift 4
  if [[ -n "${!var:-}" ]]; then
    echo "$var=${!var}"
  elif [[ -d "$shared/$folder" ]]; then
    echo "$var=$(cd "$shared/$folder" && pwd)"
  else
    clone "$peers/interop/$folder" "$repo" "$commit" "$@" || exit 1
    echo "$var=$peers/interop/$folder"
  fi
}

corpus YEP_ZOT_INTEROP zot "$zot_git" "$zot_commit" "${zot_paths[@]}"
corpus YEP_CLAUDE_INTEROP claude-plugins "$claude_git" "$claude_commit" "${claude_paths[@]}"
