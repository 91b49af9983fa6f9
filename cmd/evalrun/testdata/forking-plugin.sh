#!/bin/sh
# A plugin that starts a child holding its stdout and stderr open, then
# becomes the real plugin named by $EVALRUN_TEST_PLUGIN: no process of the
# tree may outlive the host.
sleep 1000 &
echo "$! $$" > "$EVALRUN_TEST_PIDFILE"
exec "$EVALRUN_TEST_PLUGIN" "$@"
