#!/usr/bin/env bash
# Install the pinned OpenCode server binary into the project-local `.opencode/` folder.
#
# Usage: scripts/install-opencode.sh
#
# - Installs the npm package `opencode-linux-x64` at the pinned version into
#   `<project root>/.opencode/` (git-ignored). Nothing is installed globally.
# - Idempotent: if the binary already exists and reports the pinned version,
#   nothing is downloaded.
# - The last line printed on stdout is the absolute path of the binary.
#
# Environment:
#   OPENCODE_VERSION   version to install (default: 1.18.34)
set -euo pipefail

VERSION="${OPENCODE_VERSION:-1.18.34}"
PACKAGE="opencode-linux-x64"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
project_root="$(cd "${script_dir}/.." && pwd)"
prefix="${project_root}/.opencode"
binary="${prefix}/node_modules/${PACKAGE}/bin/opencode"

die() {
    echo "install-opencode: error: $*" >&2
    exit 1
}

installed_version() {
    # Prints the version reported by the binary, or nothing. Even `--version` makes
    # opencode create its config/data/cache/state folders, so it runs with a
    # throwaway HOME and XDG dirs to leave the user's home untouched.
    if [[ -x "${binary}" ]]; then
        local sandbox
        sandbox="$(mktemp -d)"
        HOME="${sandbox}" \
            XDG_CONFIG_HOME="${sandbox}/config" XDG_DATA_HOME="${sandbox}/data" \
            XDG_CACHE_HOME="${sandbox}/cache" XDG_STATE_HOME="${sandbox}/state" \
            OPENCODE_DISABLE_AUTOUPDATE=1 \
            "${binary}" --version 2>/dev/null | tr -d '[:space:]' || true
        rm -rf "${sandbox}"
    fi
}

if [[ "$(installed_version)" == "${VERSION}" ]]; then
    echo "install-opencode: ${PACKAGE}@${VERSION} already installed" >&2
    echo "${binary}"
    exit 0
fi

case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) ;;
    *) die "only linux x86_64 is supported by this script (package ${PACKAGE}); got $(uname -s)-$(uname -m)" ;;
esac

command -v node >/dev/null 2>&1 \
    || die "'node' was not found on PATH. Install Node.js (>= 18) and npm, then re-run."
command -v npm >/dev/null 2>&1 \
    || die "'npm' was not found on PATH. Install npm (it ships with Node.js), then re-run."

echo "install-opencode: installing ${PACKAGE}@${VERSION} into ${prefix}" >&2
mkdir -p "${prefix}"
npm install \
    --prefix "${prefix}" \
    --no-save --no-audit --no-fund --no-package-lock \
    --loglevel=error \
    "${PACKAGE}@${VERSION}" >&2 \
    || die "npm install of ${PACKAGE}@${VERSION} failed (see npm output above)."

[[ -f "${binary}" ]] || die "npm finished but the binary is missing at ${binary}"
chmod +x "${binary}" 2>/dev/null || true

got="$(installed_version)"
[[ "${got}" == "${VERSION}" ]] \
    || die "installed binary reports version '${got}', expected '${VERSION}' (${binary})"

echo "install-opencode: ok (${PACKAGE}@${got})" >&2
echo "${binary}"
