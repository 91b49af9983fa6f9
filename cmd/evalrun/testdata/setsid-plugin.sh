#!/bin/sh
# A plugin that detaches a child into a session of its own (setsid: it
# leaves the plugin's process group), then becomes the real plugin named by
# $TEST_EVALRUN_PLUGIN: the child must not outlive the run.
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
echo "$! $$" > "$TEST_EVALRUN_PIDFILE"
exec "$TEST_EVALRUN_PLUGIN" "$@"
