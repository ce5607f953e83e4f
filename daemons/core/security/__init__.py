"""HTCondor's security model for htcpool: IDTOKENS, authorization levels, ALLOW/DENY lists, TLS.

Pure decision modules (levels, keys, tokens, authz, table, discovery) and the two RPC
pipeline layers that apply them (layer.py); config.py reads the knobs once.
"""
