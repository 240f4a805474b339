#!/usr/bin/env bash
# Installs the Debian packages CareGate builds and tests with, when any is missing.
#   libcurl4-openssl-dev  HTTP for the FHIR client (system-library target)
#   zlib1g-dev            inflates FHIR packages (.tgz); libcurl4-openssl-dev brings it too
#   libxml2-dev           FHIR XML through libxml2's streaming reader
#   libsqlite3-dev        the care store
#   libxml2-utils         xmllint, which the tests use to check written XML against the R4 schemas
#   pkg-config            finds libxml2's headers for the build
#   ca-certificates       the system's CAs, which libcurl verifies EHR servers against
#   openssl               the SMART tests' token endpoint verifies JWT signatures with it, and
#                         the server TLS test makes its certificate
#   curl                  a test runs the README's curl examples against caregate serve
# With --for-tests (what scripts/test.sh passes), also chromium, in which a test opens the
# dashboard's pages, weasyprint, which renders `caregate report --format pdf`, and postgresql,
# the second store backend's server (scripts/test-postgres.sh runs a scratch cluster of it);
# when they cannot be installed the run goes on and their tests say SKIPPED.
set -euo pipefail

if [ "${1:-}" = "--for-tests" ] && ! { command -v chromium && command -v weasyprint && ls /usr/lib/postgresql/*/bin/initdb; } >/dev/null 2>&1; then
  echo "Installing Debian packages: chromium (headless, for the dashboard's browser test), weasyprint (PDF reports), postgresql (the PostgreSQL store's tests)" >&2
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium weasyprint postgresql >/dev/null; }; then
    echo "warning: could not install chromium, weasyprint and postgresql; their tests will be SKIPPED" >&2
  fi
fi

packages=(libcurl4-openssl-dev zlib1g-dev libxml2-dev libsqlite3-dev libxml2-utils pkg-config ca-certificates openssl curl)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "Installing Debian packages: ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "error: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
