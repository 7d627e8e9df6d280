# Sourced by .ci/run: installs PostgreSQL if missing, starts a private
# throwaway server on a free loopback port, exports KIRA_TEST_POSTGRES, and
# stops the server when the script exits.
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$pg_bin" ]; then
  echo "== installing PostgreSQL (Debian's postgresql package)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi
pg_dir=$(mktemp -d /tmp/kira-ci-pg.XXXXXX)
chown postgres "$pg_dir"
pg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 54329)
su postgres -c "$pg_bin/initdb -D $pg_dir/data -A trust -U postgres" >/dev/null
su postgres -c "$pg_bin/pg_ctl -D $pg_dir/data -o '-p $pg_port -k $pg_dir -c listen_addresses=127.0.0.1' -l $pg_dir/log -w start" >/dev/null
stop_postgres() { su postgres -c "$pg_bin/pg_ctl -D $pg_dir/data -m fast -w stop" >/dev/null 2>&1; rm -rf "$pg_dir"; }
trap stop_postgres EXIT
export KIRA_TEST_POSTGRES="postgres://postgres@127.0.0.1:$pg_port/postgres?sslmode=disable"
echo "== PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$pg_port"
