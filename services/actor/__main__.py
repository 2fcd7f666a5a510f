"""Run an actor: ``python -m services.actor --alignments DIR --learner-address H:P --replay-address H:P``.

Start-up: read the config (flags, ``PHYLORL_ACTOR_*``, file; logged as JSON), load and prepare the corpus
(preparation cached by content), then step environments until stopped. The learner and the replay service may
come and go: calls are retried with backoff. SIGTERM or SIGINT stops after the current step, sends what is
buffered, and exits 0.
"""

from __future__ import annotations

import logging
import sys
import threading

import grpc

from phylorl.env.corpus import load_corpus
from phylorl.env.prepare import PreparationCache
from phylorl.env.tree_env import EnvAlignment
from phylorl.env.vec_env import VecTreeEnv
from services.actor.actor import STOP_GRACE_S, Actor
from services.actor.config import PROG, ActorConfig, load
from services.common import security
from services.common.rpc import MAX_MESSAGE_BYTES, message_options
from services.common.runtime import start_service, startup
from services.replay.client import ReplayClient

log = logging.getLogger("phylorl.actor")


def build_envs(config: ActorConfig) -> VecTreeEnv:
    paths = [p for p in config.alignments.split(",") if p]
    corpus = load_corpus(paths, skip_unreadable=config.skip_unreadable)
    for path, message in corpus.skipped:
        log.warning("skipped unreadable alignment %s: %s", path, message)
    cache = PreparationCache(config.cache_dir)
    entries = []
    for i, entry in enumerate(corpus.entries, 1):
        prepared = cache.get(entry.alignment, config.model)
        facts = (entry.path, i, len(corpus), entry.alignment.n_taxa, prepared.model, prepared.nj_loglik)
        log.info("prepared %s (%d/%d): %d taxa, model %s, NJ logL %.3f", *facts)
        entries.append(EnvAlignment.build(entry.alignment, prepared, str(entry.path)))
    return VecTreeEnv(entries, config.envs, config.env, seed=config.seed)


def main(argv: list[str] | None = None) -> int:
    config, stop = start_service(PROG, load, argv, log)
    envs = startup(PROG, build_envs, config)
    channel = security.channel(config.learner_address, config, message_options(MAX_MESSAGE_BYTES))
    replay = ReplayClient(config.replay_address, MAX_MESSAGE_BYTES, security=config)
    actor = Actor(config, envs, channel, replay, stop)
    log.info("actor %s (run %s) stepping %d environments", actor.actor_id, actor.run_id, len(envs))
    # the loop runs on a worker thread so that SIGTERM is handled at once even while a call blocks
    errors: list[BaseException] = []

    def loop() -> None:
        try:
            actor.run()
        except BaseException as exc:  # reported below; the process then exits non-zero
            if isinstance(exc, grpc.RpcError) and stop.is_set() and exc.code() == grpc.StatusCode.CANCELLED:
                log.info("stopped during a call (what waits stays in the journal for the next actor)")
                return
            log.exception("actor loop failed")
            errors.append(exc)
            stop.set()

    worker = threading.Thread(target=loop, name="actor-loop")
    worker.start()
    while worker.is_alive() and not stop.wait(0.5):
        pass
    # the loop's own stop budget
    worker.join(config.rpc_timeout_s if not stop.is_set() else STOP_GRACE_S + 1.0)
    # then cancel the calls still in flight: an inference call, or an insert the replay's rate limiter holds
    # (the learner has stopped sampling); what that insert carried stays in the journal for the next actor
    channel.close()
    replay.close()
    worker.join(10.0)
    log.info("stopped after %d steps, %d episodes", actor.steps, actor.episodes)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
