"""Live telemetry: gather an incident bundle from running systems, or receive spans as they
are exported.  Above ``sources`` (whose readers and clients it reuses), below ``pipeline``
(whose ``watch`` loop calls it).

* ``spool``      a bounded queue of span batches and the thread that writes them to a capture
* ``receiver``   the OTLP/HTTP receiver (``tailtriage receive``) in front of the spool
"""
