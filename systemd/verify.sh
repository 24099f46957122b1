#!/usr/bin/env bash
# Checks the service files as CI does: every systemd unit (shipped and as
# `squadctl service install` renders it) passes `systemd-analyze verify` with
# no warnings, and the launchd plist is well-formed. Needs built binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
squadd="$(cd "$target/debug" && pwd)/squadd"
squadctl="$(cd "$target/debug" && pwd)/squadctl"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/project"
mkdir -p "$root" "$work/units" "$work/xdg"
chmod 700 "$work/xdg"

if ! command -v systemd-analyze >/dev/null; then
  echo "systemd-analyze not found; install systemd to check the units" >&2
  exit 1
fi

check() { # mode file
  local out
  if [ "$1" = user ]; then
    out=$(XDG_RUNTIME_DIR="$work/xdg" systemd-analyze --user verify "$2" 2>&1) || { echo "$out"; exit 1; }
  else
    out=$(systemd-analyze verify "$2" 2>&1) || { echo "$out"; exit 1; }
  fi
  # verify exits 0 on unknown keys and the like; any message is a failure.
  if [ -n "$out" ]; then echo "$2:"; echo "$out"; exit 1; fi
  echo "ok  $2"
}

# The shipped files, with the binary path pointed at the built squadd.
sed "s|/usr/local/bin/squadd|$squadd|; s|/srv/squad/project|$root|g" systemd/squadd.service > "$work/units/squadd.service"
sed "s|%h/.cargo/bin/squadd|$squadd|; s|%h/project|$root|" systemd/squadd-user.service > "$work/units/squadd-user.service"
# The template is checked as an instance for the root (`%f` = /path/to/root).
instance="squadd@$(systemd-escape --path "$root").service"
sed "s|/usr/local/bin/squadd|$squadd|" 'systemd/squadd@.service' > "$work/units/$instance"
check system "$work/units/squadd.service"
check user "$work/units/squadd-user.service"
check system "$work/units/$instance"

# As squadctl renders them.
# --run-as: a system unit never guesses its user, and CI may have no $USER.
"$squadctl" service install --system --root "$root" --binary "$squadd" --run-as "$(id -un)" --print > "$work/units/rendered-system.service"
"$squadctl" service install --user --root "$root" --binary "$squadd" --print > "$work/units/rendered-user.service"
check system "$work/units/rendered-system.service"
check user "$work/units/rendered-user.service"

# The plist: well-formed, with the keys launchd needs.
python3 - systemd/dev.squad.squadd.plist <<'PY'
import plistlib, sys
with open(sys.argv[1], "rb") as f:
    p = plistlib.load(f)
for key in ("Label", "ProgramArguments", "KeepAlive", "StandardOutPath", "StandardErrorPath"):
    assert key in p, f"{key} missing"
print("ok  " + sys.argv[1])
PY
"$squadctl" service install --launchd --root "$root" --binary "$squadd" --print > "$work/units/rendered.plist"
python3 -c "import plistlib,sys; plistlib.load(open(sys.argv[1],'rb')); print('ok  rendered plist')" "$work/units/rendered.plist"
