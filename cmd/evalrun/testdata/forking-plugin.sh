#!/bin/sh
# A plugin that starts a child holding its stdout and stderr open, then
# becomes the real plugin named by $TEST_EVALRUN_PLUGIN: no process of the
# tree may outlive the host.
sleep 1000 &
echo "$! $$" > "$TEST_EVALRUN_PIDFILE"
exec "$TEST_EVALRUN_PLUGIN" "$@"
