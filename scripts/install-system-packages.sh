#!/usr/bin/env bash
# Installs the Debian packages CareGate builds and tests with, when any is missing.
#   libcurl4-openssl-dev  HTTP for the FHIR client (system-library target)
#   libxml2-dev           FHIR XML through libxml2's streaming reader
#   libsqlite3-dev        the care store
#   libxml2-utils         xmllint, which the tests use to check written XML against the R4 schemas
#   pkg-config            finds libxml2's headers for the build
#   ca-certificates       the system's CAs, which libcurl verifies EHR servers against
#   openssl               the SMART tests' token endpoint verifies JWT signatures with it, and
#                         the server TLS test makes its certificate
#   curl                  a test runs the README's curl examples against caregate serve
# With --renderers (what scripts/test.sh passes), also chromium, in which a test opens the
# dashboard's pages, and weasyprint, which renders `caregate report --format pdf`; when they
# cannot be installed the run goes on and their tests say SKIPPED.
set -euo pipefail

if [ "${1:-}" = "--renderers" ] && ! { command -v chromium && command -v weasyprint; } >/dev/null; then
  echo "Installing Debian packages: chromium (headless, for the dashboard's browser test), weasyprint (PDF reports)" >&2
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium weasyprint >/dev/null; }; then
    echo "warning: could not install chromium and weasyprint; their tests will be SKIPPED" >&2
  fi
fi

packages=(libcurl4-openssl-dev libxml2-dev libsqlite3-dev libxml2-utils pkg-config ca-certificates openssl curl)
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
