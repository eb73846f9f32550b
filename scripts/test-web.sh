#!/usr/bin/env bash
# The web app's and the SDK's checks and tests (issue 6). Idempotent; CI runs it as root
# with no TTY from a fresh clone. `scripts/test-web.sh --deps` does step 1 alone.
#   1. npm ci in sdk/ and web/, only when node_modules is missing or differs from the lockfile;
#   2. the committed generated SDK (sdk/src/gen), its built package (sdk/dist) and the web
#      build (web/static/js) match a fresh generation and build;
#   3. tsc --strict over the SDK with its usage example and over every TypeScript snippet
#      of the READMEs and docs/ (the web build is strict too); the SDK's own tests (stub fetch);
#   4. builds the agentfy binary once, then runs the Node tests (playwright-core driving
#      Debian's Chromium) against the real local stack that each test file starts and
#      stops; the packed SDK is installed into an empty project and run from there.
# Screenshots go to $AGENTFY_WEB_ARTIFACTS (default .artifacts/web); a failed browser test
# leaves its Playwright trace and screenshots under its failures/.
set -euo pipefail
cd "$(dirname "$0")/.."

# lock_fresh DIR succeeds when DIR/node_modules holds exactly what DIR/package-lock.json
# pins (npm keeps a copy of the installed tree in node_modules/.package-lock.json).
lock_fresh() {
  node -e '
    const fs = require("fs"), { isDeepStrictEqual } = require("util");
    const dir = process.argv[1];
    try {
      const want = JSON.parse(fs.readFileSync(dir + "/package-lock.json", "utf8")).packages;
      const have = JSON.parse(fs.readFileSync(dir + "/node_modules/.package-lock.json", "utf8")).packages;
      delete want[""];
      process.exit(isDeepStrictEqual(want, have) ? 0 : 1);
    } catch { process.exit(1); }
  ' "$1"
}

for dir in sdk web; do
  if ! lock_fresh "$dir"; then
    echo "== npm ci in $dir" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
done
# --deps: step 1 alone, for the test command to run before the compose test, which
# reads web/node_modules side by side with this script.
[ "${1:-}" != "--deps" ] || exit 0

echo "== sdk: generated code and dist/ match openapi/openapi.yaml and src/" >&2
(cd sdk && npm run --silent check)
echo "== sdk: tsc --strict (SDK, usage example, README and docs snippets)" >&2
(cd sdk && npm run --silent typecheck && node scripts/check-snippets.mjs)
echo "== sdk: its tests (stub fetch)" >&2
(cd sdk && node --test --test-reporter=dot test/)
echo "== web: committed build matches src (tsc --strict)" >&2
(cd web && npm run --silent check)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== go build ./cmd/agentfy-dev ./cmd/agentfy" >&2
go build -o "$tmp/" ./cmd/agentfy-dev ./cmd/agentfy

export AGENTFY_WEB_ARTIFACTS="${AGENTFY_WEB_ARTIFACTS:-$PWD/.artifacts/web}"
rm -rf "$AGENTFY_WEB_ARTIFACTS/failures"
echo "== node --test web/test (real stack, Chromium); screenshots in $AGENTFY_WEB_ARTIFACTS" >&2
status=0
(
  cd web
  # Two test files at a time, each with a stack and a browser of its own (they mostly
  # wait on the window's 5 s cadence). Each test file has 5 minutes; the whole run 15.
  # On a timeout the test processes get SIGTERM and stop the stacks and browsers they
  # started.
  AGENTFY_BIN="$tmp/agentfy-dev" AGENTFY_CLI="$tmp/agentfy" timeout --kill-after=30s 15m \
    node --test --test-concurrency=2 --test-timeout=300000 \
    --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$tmp/web.tap" \
    test/*.test.mjs
) || status=$?

pass=$(sed -n 's/^# pass //p' "$tmp/web.tap" | tail -1)
fail=$(sed -n 's/^# fail //p' "$tmp/web.tap" | tail -1)
echo "web: ${pass:-0} passed, ${fail:-0} failed"
if [ "$status" -ne 0 ] && [ "${fail:-0}" = 0 ]; then
  echo "web: the test run ended with status $status" >&2
fi
if [ -d "$AGENTFY_WEB_ARTIFACTS/failures" ]; then
  echo "web: traces and screenshots of the failures: $AGENTFY_WEB_ARTIFACTS/failures (npx playwright-core show-trace FILE, in web/)" >&2
fi
exit "$status"
