"""Training garag's verifier: data from FEVER train pairs, fine-tuning, distillation, calibration.

``garag train-verifier`` runs it (:func:`training.verifier.ensure_verifier`); the commands that
verify call :func:`training.verifier.ensure_verifiers` as an explicit step before building a
pipeline.  The trained artifact is found and loaded by :mod:`verifier.trained`.  On a machine with
CUDA, training runs on the GPU.
"""
