#!/usr/bin/env bash
# The release as a user gets it: build the wheel from a checkout, install it into new virtual
# environments OUTSIDE the checkout (nothing of the source tree on sys.path), and run there what a
# user runs. A module, template or data file missing from the wheel fails this script.
#
#   .ci/wheel-check.sh [CHECKOUT]      (default: the checkout holding this script)
#
# 1. chatfn[all] + pytest: import every module the wheel's RECORD lists; `chatfn init` and the
#    console quick start piped (/help, /roll_dice count=2) in an empty folder; `chatfn check`;
#    `chatfn migrate`; `--version`; a one-file user test on the `testbot` fixture (pytest11).
# 2. chatfn with only its base dependencies (a SQLite bot): the modules import (those that need
#    an extra fail only for that extra), the same quick start and check, and a PostgreSQL or
#    RabbitMQ config stops with the one line naming its extra.
# Needs network access to PyPI (or a pip cache / index holding the dependencies).
set -euo pipefail
repo="$(cd "${1:-"$(dirname "$0")/.."}" && pwd)"
python="${PYTHON:-python3}"
# Nothing from the caller's environment may put a source tree on the path.
unset PYTHONPATH PYTHONHOME PYTHONSTARTUP PYTHONUSERBASE
export PYTHONNOUSERSITE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
for var in OPENAI_API_KEY OPENAI_BASE_URL CHATFN_MODEL; do unset "$var"; done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
say() { printf 'wheel-check: %s\n' "$*"; }
fail() { printf 'wheel-check: FAILED: %s\n' "$*" >&2; exit 1; }

# Built from a copy of the checkout's files (tracked, and new ones not ignored), so no build/
# left over from an earlier build can put a file into the wheel that the tree would not.
say "building the wheel of $repo"
mkdir "$work/src"
if git -C "$repo" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    (cd "$repo" && git ls-files -z --cached --others --exclude-standard \
        | xargs -0 -I{} sh -c '[ -f "$1" ] && printf "%s\0" "$1"' _ {}) \
        | (cd "$repo" && tar --null -T - -cf -) | tar -xf - -C "$work/src"
else
    cp -R "$repo/." "$work/src"
fi
"$python" -m pip wheel --no-deps --quiet --wheel-dir "$work/dist" "$work/src"
wheels=("$work"/dist/chatfn-*.whl)
[ "${#wheels[@]}" -eq 1 ] && [ -f "${wheels[0]}" ] || fail "expected one chatfn wheel in $work/dist"
wheel="${wheels[0]}"
say "built $(basename "$wheel")"

# Imports every module of the installed distribution (its RECORD), each from site-packages.
# `base`: a module may fail only with ModuleNotFoundError for an extra's package.
cat > "$work/import_all.py" <<'PY'
import importlib
import importlib.metadata as md
import sys
import sysconfig

mode = sys.argv[1]
# `base`: the import names only the extras bring (argv[2]: the top-level import names of every
# distribution in the chatfn[all] venv that the base venv lacks), so a new channel's SDK needs
# no list kept by hand here, and a module failing for a base dependency still fails.
EXTRA_PACKAGES = set(open(sys.argv[2]).read().split()) if mode == "base" else set()
site = sysconfig.get_paths()["purelib"]
names = sorted(
    ".".join(f.with_suffix("").parts).removesuffix(".__init__")
    for f in md.distribution("chatfn").files
    if f.suffix == ".py" and "templates" not in f.parts and ".dist-info" not in str(f)
    and f.name != "__main__.py"  # runs the program: `python -m chatfn --version` below
)
# Alembic's env script runs only inside a migration: `chatfn migrate` below runs it.
names.remove("chatfn.storage.migrations.env")
assert len(names) > 100, f"only {len(names)} modules in the RECORD"
skipped, failed = [], []
for name in names:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if mode == "base" and (exc.name or "").split(".")[0] in EXTRA_PACKAGES:
            skipped.append(f"{name} (needs {exc.name})")
            continue
        failed.append(f"{name}: {exc!r}")
        continue
    except Exception as exc:
        failed.append(f"{name}: {exc!r}")
        continue
    where = getattr(module, "__file__", "") or ""
    if not where.startswith(site):
        failed.append(f"{name}: imported from {where}, not from the installed wheel")
for line in skipped:
    print(f"  without its extra: {line}")
if failed:
    sys.exit("modules that do not import:\n  " + "\n  ".join(failed))
print(f"{len(names) - len(skipped)} of {len(names)} modules import from {site}")
PY

# The console quick start in an empty folder: chatfn init, then chatfn with piped input.
quick_start() {
    local venv="$1" dir="$2"
    mkdir -p "$dir"
    (
        cd "$dir"
        "$venv/bin/chatfn" init > init.out
        grep -q "wrote config.yaml" init.out || fail "chatfn init: $(cat init.out)"
        [ -f config.yaml ] && [ -f plugins/example.py ] || fail "chatfn init wrote no files"
        "$venv/bin/chatfn" init > init2.out
        grep -q "skipped config.yaml" init2.out || fail "chatfn init overwrote: $(cat init2.out)"
        printf '/help\n/roll_dice count=2\n' | "$venv/bin/chatfn" > console.out 2> console.err \
            || fail "chatfn exited $?: $(tail -20 console.err)"
        grep -q "/roll_dice" console.out || fail "no /roll_dice in /help: $(cat console.out)"
        grep -q "2d6:" console.out || fail "/roll_dice count=2 did not roll: $(cat console.out)"
        "$venv/bin/chatfn" check > check.out || fail "chatfn check: $(cat check.out)"
        "$venv/bin/chatfn" migrate > migrate.out || fail "chatfn migrate: $(cat migrate.out)"
        "$venv/bin/python" -m chatfn --version > version.out
        grep -qx "chatfn $version" version.out || fail "--version: $(cat version.out)"
    )
}

version="$(basename "$wheel" | cut -d- -f2)"

say "1/2: chatfn[all] in a new venv"
"$python" -m venv "$work/full"
"$work/full/bin/pip" install -qq "$wheel[all]" "pytest>=8.0" "pytest-asyncio>=0.23"
"$work/full/bin/python" "$work/import_all.py" all
quick_start "$work/full" "$work/full-bot"
say "quick start, check, migrate and --version ok"
# A user's test of their plugin, on the fixture the wheel registers for pytest.
cat > "$work/full-bot/test_my_plugin.py" <<'PY'
from chatfn.testing import ScriptedModel, call


async def test_roll_dice(testbot):
    tb = await testbot(
        plugins=["plugins/example.py"],
        model=ScriptedModel([call("roll_dice", count=2)]),
    )
    assert (await tb.send("roll two dice"))[0].startswith("🎲 2d6:")
    assert (await tb.send("/roll_dice count=3"))[0].startswith("🎲 3d6:")
PY
(
    cd "$work/full-bot"
    # Exit 5 (nothing collected) or a skip must not pass: exactly one test, passed.
    if ! "$work/full/bin/python" -m pytest -p no:cacheprovider -o asyncio_mode=auto \
        test_my_plugin.py > pytest.out 2>&1; then
        fail "the user test failed: $(tail -30 pytest.out)"
    fi
    grep -Eq "^=+ 1 passed(, [0-9]+ warnings?)? in " pytest.out \
        || fail "the user test did not run and pass: $(tail -30 pytest.out)"
)
say "user test on the testbot fixture passed"

say "2/2: chatfn with base dependencies only (a SQLite bot) in a new venv"
"$python" -m venv "$work/base"
"$work/base/bin/pip" install -qq "$wheel"
# The top-level import names each venv's distributions provide; the difference is the extras'.
import_names='import importlib.metadata as md; print("\n".join(sorted(md.packages_distributions())))'
"$work/full/bin/python" -c "$import_names" > "$work/full-names"
"$work/base/bin/python" -c "$import_names" > "$work/base-names"
LC_ALL=C comm -23 "$work/full-names" "$work/base-names" > "$work/extra-names"
grep -qx telegram "$work/extra-names" || fail "the extras' import names miss telegram: $(cat "$work/extra-names")"
"$work/base/bin/python" "$work/import_all.py" base "$work/extra-names"
quick_start "$work/base" "$work/base-bot"
say "quick start, check, migrate and --version ok"
# What needs an extra says so in one line (the bot) and in the check's table.
(
    cd "$work/base-bot"
    printf 'storage:\n  url: postgresql+psycopg://chatfn:secret@127.0.0.1:1/chatfn\n' > pg.yaml
    printf 'broker:\n  url: amqp://guest:guest@127.0.0.1:1/\n' > mq.yaml
    for case in 'pg.yaml|storage.url is PostgreSQL: pip install "chatfn[postgres]"' \
        'mq.yaml|broker.url is RabbitMQ: pip install "chatfn[rabbitmq]"'; do
        config="${case%%|*}" line="${case#*|}"
        code=0
        "$work/base/bin/chatfn" --config "$config" < /dev/null > run.out 2> run.err || code=$?
        [ "$code" -eq 2 ] && [ "$(cat run.err)" = "chatfn: $line" ] \
            || fail "chatfn --config $config: exit $code, stderr: $(cat run.err)"
        code=0
        "$work/base/bin/chatfn" check --config "$config" > check.out || code=$?
        [ "$code" -eq 1 ] && grep -qF "$line" check.out \
            || fail "chatfn check --config $config: exit $code: $(cat check.out)"
    done
)
say "a config needing a missing extra is one line naming it"
say "ok: $(basename "$wheel")"
