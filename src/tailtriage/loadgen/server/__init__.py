"""Simulated OpenAI-compatible engine servers (``tailtriage serve-sim``).

* ``sim``      timings from the simulator's engine model, in real time (``--engine sim``)
* ``fast``     a fixed TTFT/ITL step grid at minimal CPU, for timing checks (``--engine fast``)
* ``metrics``  a vLLM-compatible ``/metrics`` exposition
* ``otlp``     server spans in vLLM's conventions, as OTLP/JSON lines (``--otlp-out``)
* ``answers``  evaluation mode: answer an evaluation set, wrong at a set rate (``--eval``)
"""
