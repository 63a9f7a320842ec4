"""Callbacks for training frameworks, imported only when asked for (no hard dependency):
`tuimon.integrations.lightning.TuimonCallback`, `tuimon.integrations.huggingface.TuimonCallback`.
"""
