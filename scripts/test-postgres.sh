#!/usr/bin/env bash
# A scratch PostgreSQL cluster for the tests: initdb and pg_ctl run as an unprivileged user
# (the `postgres` account Debian's package makes, when this runs as root) in a temporary
# folder, listening on 127.0.0.1 only, on a free port, with password (SCRAM) authentication.
#
#   eval "$(scripts/test-postgres.sh start DIR)"   prints the exports the tests read:
#       CAREGATE_TEST_POSTGRES=postgres://caregate@127.0.0.1:PORT/postgres
#       CAREGATE_TEST_POSTGRES_PASSWORD_FILE=DIR/password
#       CAREGATE_TEST_POSTGRES_CA=DIR/ca.pem   (the server also speaks TLS, with a certificate
#                                              for 127.0.0.1 and localhost signed by this CA)
#   scripts/test-postgres.sh stop DIR
#
# Without PostgreSQL's binaries it prints nothing and exits 0: the tests then say SKIPPED.
set -euo pipefail
command=${1:?start or stop}
dir=${2:?a folder for the cluster}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  echo "PostgreSQL not found (Debian's postgresql package): the PostgreSQL store's tests will say SKIPPED" >&2
  exit 0
fi
as_owner=()
if [ "$(id -u)" -eq 0 ]; then as_owner=(runuser -u postgres --); fi

case "$command" in
start)
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
  chmod 700 "$dir"
  head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$dir/password"
  [ "$(id -u)" -eq 0 ] && chown postgres "$dir/password"
  chmod 600 "$dir/password"
  # A CA of the run's own and a server certificate it signs, for the verify-full tests.
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=CareGate test CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" >/dev/null 2>&1
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$dir/server.key" -out "$dir/server.csr" >/dev/null 2>&1
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$dir/san.ext"
  openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 2 -extfile "$dir/san.ext" \
      -out "$dir/server.pem" >/dev/null 2>&1
  chmod 600 "$dir/server.key"
  [ "$(id -u)" -eq 0 ] && chown postgres "$dir/server.key" "$dir/server.pem"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "${as_owner[@]}" "$bin/initdb" -D "$dir/data" -U caregate --pwfile="$dir/password" --auth-host=scram-sha-256 --auth-local=reject \
      --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1
  "${as_owner[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='$dir' -c max_connections=200 -c fsync=on -c ssl=on -c ssl_cert_file='$dir/server.pem' -c ssl_key_file='$dir/server.key'" start >/dev/null
  # The tests run as this script's caller: the password file is theirs to read.
  cp "$dir/password" "$dir/password-for-tests"; chmod 600 "$dir/password-for-tests"
  [ "$(id -u)" -eq 0 ] && chown "$(id -u)" "$dir/password-for-tests"
  echo "export CAREGATE_TEST_POSTGRES=postgres://caregate@127.0.0.1:$port/postgres"
  echo "export CAREGATE_TEST_POSTGRES_PASSWORD_FILE=$dir/password-for-tests"
  echo "export CAREGATE_TEST_POSTGRES_CA=$dir/ca.pem"
  ;;
stop)
  [ -d "$dir/data" ] && "${as_owner[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  ;;
*) echo "test-postgres.sh: start or stop" >&2; exit 64 ;;
esac
