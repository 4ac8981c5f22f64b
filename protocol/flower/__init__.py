"""fedhh inside Flower (docs/flower.md): our secure aggregation as a drop-in for
Flower's SecAgg+, and TrieHH / TrieHH++ as Flower apps.

* :mod:`protocol.flower.session` (no Flower import): the session offer a ServerApp sends
  and a ClientApp checks, the quantisation of float updates with Flower's options, the
  PKI of the malicious-server variant, and the client-side policy.
* :mod:`protocol.flower.secagg_mod`: the ClientApp mod ``fedhh_secagg_mod``, replacing
  ``flwr.client.mod.secaggplus_mod``.
* :mod:`protocol.flower.workflow`: the ServerApp fit workflow ``FedhhSecAggWorkflow``,
  replacing ``flwr.server.workflow.SecAggPlusWorkflow``, and the driver both it and the
  TrieHH app run our state machines with over a Flower ``Grid``.
* :mod:`protocol.flower.triehh_app`: TrieHH and TrieHH++ as a ServerApp and a ClientApp.
* :mod:`protocol.flower.node`: a node's side of a session (shared by the mod and the
  TrieHH ClientApp).
* :mod:`protocol.flower.local`: a ``Grid`` running a ClientApp's nodes in this process
  (tests, and measurements beyond what the simulation engine holds here).
* :mod:`protocol.flower.fedavg_app`, :mod:`protocol.flower.bench`: the FedAvg app the
  tests compare and ``fedhh bench flower --app`` measures.
* :mod:`protocol.flower.template`: the project ``fedhh flower new`` writes.

This package sits beside the CLI (docs/architecture.md): it drives the core, the studies
and the mechanisms, and nothing below imports it. Flower is the optional extra
``fedhh[flower]``; only the modules that need it import it.
"""
