#!/usr/bin/env bash
# The release a user can check: `python -m build` makes the sdist and the wheel of a copy of the
# checkout, `twine check` passes on both, and the version is the one in chatfn/common/version.py
# everywhere it shows: the file names, CHANGELOG.md's newest section, README's install and image
# lines. build and twine go into a throwaway virtual environment.
#
#   .ci/release-check.sh [CHECKOUT]        (default: the checkout holding this script)
set -euo pipefail
repo="$(cd "${1:-"$(dirname "$0")/.."}" && pwd)"
python="${PYTHON:-python3}"
say() { printf 'release-check: %s\n' "$*"; }
fail() { printf 'release-check: FAILED: %s\n' "$*" >&2; exit 1; }
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/chatfn/common/version.py")"
[ -n "$version" ] || fail "no __version__ in chatfn/common/version.py"

grep -q -E "^## $version( |$)" "$repo/CHANGELOG.md" || fail "CHANGELOG.md has no section '## $version'"
grep -q -F "chatfn-$version-py3-none-any.whl" "$repo/README.md" \
    || fail "README.md's install line does not name chatfn-$version-py3-none-any.whl"
grep -q -F -- "--build-arg VERSION=$version " "$repo/README.md" \
    || fail "README.md's docker build line does not pass VERSION=$version"

mkdir "$work/src"
if git -C "$repo" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    (cd "$repo" && git ls-files -z --cached --others --exclude-standard \
        | xargs -0 -I{} sh -c '[ -f "$1" ] && printf "%s\0" "$1"' _ {}) \
        | (cd "$repo" && tar --null -T - -cf -) | tar -xf - -C "$work/src"
else
    cp -R "$repo/." "$work/src"
fi
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet "build>=1.0" "twine>=5.0" > "$work/pip.log" 2>&1 \
    || { tail -30 "$work/pip.log" >&2; fail "pip install build twine"; }
(cd "$work/src" && "$work/venv/bin/python" -m build --outdir "$work/dist" > "$work/build.log" 2>&1) \
    || { tail -30 "$work/build.log" >&2; fail "python -m build"; }
for f in "chatfn-$version.tar.gz" "chatfn-$version-py3-none-any.whl"; do
    [ -f "$work/dist/$f" ] || fail "python -m build made no $f: $(ls "$work/dist")"
done
"$work/venv/bin/twine" check --strict "$work"/dist/* || fail "twine check"
say "chatfn $version: sdist and wheel built, twine check passed"
