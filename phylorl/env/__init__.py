"""Tree-search environments: per-alignment preparation (:mod:`~phylorl.env.prepare`), observations built from
trees (:mod:`~phylorl.env.observation`), :class:`~phylorl.env.tree_env.TreeEnv` and
:class:`~phylorl.env.vec_env.VecTreeEnv`, their settings (:mod:`~phylorl.env.config`).

The observation and transition types themselves live in :mod:`phylorl.types` (numpy only), so the replay
service and the wire codecs use them without loading the likelihood engine. The package imports none of its
modules, so that the settings are read without them too.
"""
