#!/bin/sh
# First start: initdb with the user and password of the environment, then the database.
set -eu
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pw="$(mktemp)"
    printf '%s\n' "${POSTGRES_PASSWORD:?}" > "$pw"
    initdb -D "$PGDATA" -U "$user" --pwfile="$pw" --encoding=UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 > /dev/null
    rm -f "$pw"
    echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/tmp" -w start > /dev/null
    if [ "$db" != postgres ]; then createdb -h /tmp -U "$user" "$db"; fi
    pg_ctl -D "$PGDATA" -w stop > /dev/null
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp
