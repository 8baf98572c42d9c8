"""Loading causal LMs (embedded tiny models, offline GGUF models, local directories, hub names)
and the one place their facts (vocabulary, context length, embedding scale) are read. May import theory.
"""
