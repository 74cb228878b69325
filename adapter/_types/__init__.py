"""What the adapter hands its host: canonical events, records, usage and cost, partial
results and stop reports. Frozen values; no behaviour that talks to a server.
"""
