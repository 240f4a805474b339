#!/bin/sh
# The container's entrypoint. The store lives in $CAREGATE_DATA (/data, a volume) as
# $CAREGATE_STORE (default $CAREGATE_DATA/caregate.sqlite). Started as root, it makes that
# folder the $CAREGATE_USER's (caregate) and runs as that user; started as any other user, it
# checks the folder is writable. Then it runs `caregate ARGS...`, or with --exec, `ARGS...`.
# Tested without Docker by Tests/caregateTests/ContainerEntrypointTests.swift.
set -eu
data="${CAREGATE_DATA:-/data}"
user="${CAREGATE_USER:-caregate}"
export CAREGATE_STORE="${CAREGATE_STORE:-$data/caregate.sqlite}"
if [ "${1:-}" = "--exec" ]; then shift; else set -- caregate "$@"; fi
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$data"
  chown "$user" "$data"
  cd "$data"
  exec setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups -- "$@"
fi
if [ ! -w "$data" ]; then
  echo "caregate: cannot write $data, where the store lives: mount a volume that user $(id -u) can write, or start the container as root" >&2
  exit 1
fi
cd "$data"
exec "$@"
