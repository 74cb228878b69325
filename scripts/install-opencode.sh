#!/usr/bin/env bash
# Install an OpenCode server binary project-locally under `.opencode/`.
#
# Usage: scripts/install-opencode.sh
#        OPENCODE_VERSION=1.17.19 scripts/install-opencode.sh
#
# - Installs the npm package `opencode-linux-x64` at the requested version
#   (default: the pinned one). Nothing is installed globally.
# - Layout (all git-ignored):
#     pinned version  -> .opencode/node_modules/opencode-linux-x64/bin/opencode
#                        (the default path find_opencode_binary() looks at)
#     other versions  -> .opencode/releases/<version>/node_modules/opencode-linux-x64/bin/opencode
#   so installing another release for the release matrix never replaces the
#   pinned binary that `make test` uses.
# - Idempotent: if the binary already exists and reports the requested version,
#   nothing is downloaded.
# - The last line printed on stdout is the absolute path of the binary.
#
# Environment:
#   OPENCODE_VERSION   version to install (default: the pinned version, 1.18.34)
set -euo pipefail

PINNED_VERSION="1.18.34"
VERSION="${OPENCODE_VERSION:-${PINNED_VERSION}}"
PACKAGE="opencode-linux-x64"

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
project_root="$(cd "${script_dir}/.." && pwd)"

[[ "${VERSION}" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] \
    || { echo "install-opencode: error: OPENCODE_VERSION must look like 1.18.34, got '${VERSION}'" >&2; exit 1; }

if [[ "${VERSION}" == "${PINNED_VERSION}" ]]; then
    prefix="${project_root}/.opencode"
else
    prefix="${project_root}/.opencode/releases/${VERSION}"
fi
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
