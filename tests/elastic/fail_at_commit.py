#!/usr/bin/env python3
"""Runs a training script with a host's loss injected at a known commit, so that a test can
compare the job that survived it with a restart from that same commit.

  fail_at_commit.py SCRIPT [ARGS...]

On the host named by CHORUS_TEST_FAIL_HOST, in the job's first launch
(CHORUS_ELASTIC_LAUNCH=1), every rank, right after commit CHORUS_TEST_FAIL_COMMIT is stored,
removes its node's commit store (the node's memory is lost with it) and kills itself with
SIGKILL. CHORUS_TEST_FAIL_HOW=hang makes its training thread hang there instead, while
Chorus's background thread goes on: a stalled rank, not a dead one.

On the host named by CHORUS_TEST_FAIL_RESTORE, in the job's second launch, every rank kills
itself once it has loaded the newest commit, before training: a failure during the
restore (the node's store stays)."""

import os
import runpy
import shutil
import signal
import socket
import sys
import time

import chorus.common.elastic as elastic
from chorus._loader import ext

if (socket.gethostname() == os.environ.get("CHORUS_TEST_FAIL_HOST")
        and os.environ.get("CHORUS_ELASTIC_LAUNCH") == "1"):
    at = int(os.environ["CHORUS_TEST_FAIL_COMMIT"])
    hang = os.environ.get("CHORUS_TEST_FAIL_HOW") == "hang"
    stored_commit = elastic.State.commit

    def commit_then_fail(state):
        stored_commit(state)
        if state._commit_number == at:
            print(f"fail_at_commit: {socket.gethostname()} pid {os.getpid()} "
                  f"{'hangs' if hang else 'is killed'} at commit {at}", file=sys.stderr,
                  flush=True)
            if hang:
                time.sleep(3600)
            shutil.rmtree(ext.elastic_commit_dir(), ignore_errors=True)
            os.kill(os.getpid(), signal.SIGKILL)

    elastic.State.commit = commit_then_fail

if (socket.gethostname() == os.environ.get("CHORUS_TEST_FAIL_RESTORE")
        and os.environ.get("CHORUS_ELASTIC_LAUNCH") == "2"):
    resume = elastic.State._resume_from_newest_commit

    def resume_then_fail(state):
        resume(state)
        print(f"fail_at_commit: {socket.gethostname()} pid {os.getpid()} is killed in the "
              f"restore", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    elastic.State._resume_from_newest_commit = resume_then_fail

script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
runpy.run_path(script, run_name="__main__")
