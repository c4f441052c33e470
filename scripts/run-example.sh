#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs an example job on
# the default device (PoCL, the CPU OpenCL). Extra arguments go to `uvcl run`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
exec build/tools/uvcl run examples/jobs/saxpy.json "$@"
