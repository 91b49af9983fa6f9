#!/bin/sh
# A "plugin" that prints something that is no handshake and then keeps its
# stdout open in a child: the host must fail it quickly and end the child.
sleep 1000 &
echo "$! $$" > "$TEST_EVALRUN_PIDFILE"
echo hello
sleep 1000
