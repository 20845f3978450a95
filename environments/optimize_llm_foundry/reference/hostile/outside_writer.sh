#!/bin/bash
# Paired with a helper the participant started from their own shell before scoring (not a
# descendant of the scorer, so not killed by it): this script writes the base model's weights into
# trained_model/ and exits; the helper keeps rewriting the file while the scorer reads it.
cd "$(dirname "$0")"
mkdir -p trained_model
cp ../assets/base_model/config.json ../assets/base_model/model.safetensors trained_model/
touch go
