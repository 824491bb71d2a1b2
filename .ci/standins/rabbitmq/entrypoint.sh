#!/bin/sh
# The default user from the environment, reachable from other containers; then the server.
set -eu
cat > "$RABBITMQ_CONFIG_FILE" <<CONF
default_user = ${RABBITMQ_DEFAULT_USER:-guest}
default_pass = ${RABBITMQ_DEFAULT_PASS:-guest}
loopback_users = none
listeners.tcp.default = 5672
CONF
exec rabbitmq-server
