"""The machinery of the graphical-model estimator (`ektelo.inference.graphical_model`):
the junction tree over a set of cliques and belief propagation on it
(`junction`), the loss and mirror descent that fit the potentials
(`fitting`), marginals outside one clique by variable elimination
(`elimination`), and forward sampling of synthetic rows (`sampling`).

After Private-PGM (McKenna, Sheldon & Miklau, "Graphical-model based
estimation and inference for differential privacy", ICML 2019, §3–§4): the
model is a product of factors on cliques, everything is held as one array
per clique, never the full domain. Public post-processing only.
"""
