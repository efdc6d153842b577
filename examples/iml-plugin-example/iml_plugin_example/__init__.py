"""An example plugin of ``iml``: the beta-weighted boosting loss (:mod:`.boosting`), a GELU
network (:mod:`.gelu`) and scikit-learn's breast-cancer table (:mod:`.breast_cancer`), each
registered through its entry point of the group ``iml.plugins`` when ``iml`` starts."""
