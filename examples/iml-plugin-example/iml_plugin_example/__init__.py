"""An example plugin of ``iml``: the beta-weighted boosting loss (:mod:`.boosting`), registered
through the entry point ``boosting`` of the group ``iml.plugins`` when ``iml`` starts."""
