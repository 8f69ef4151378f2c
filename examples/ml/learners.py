"""The online learners of the ML showcase, behind one small interface, so
that the coupling code (model.py) does not depend on which library trains.

A learner is a multilayer perceptron from a maintained library that
  - `partial_fit(x, y)` trains one pass over a batch (returns its loss),
  - `predict(x)` predicts (zeros before the first fit),
  - `parameters()` lists its weight arrays and `set_parameters(arrays)`
    replaces them, which the model program uses to average the weights of
    its ranks after every step (data-parallel training by averaging).
Every rank builds its learner from the same seed, so all start equal.

Backends: "sklearn" (scikit-learn's MLPRegressor, what `make deps`
installs) and "torch" (PyTorch, if installed; see docs/showcase_ml.md for
why it is not the default here).
"""

from typing import List, Sequence

import numpy as np


class SklearnLearner:
    def __init__(self, inputs: int, hidden: Sequence[int], seed: int, rate: float) -> None:
        from sklearn.neural_network import MLPRegressor
        from threadpoolctl import threadpool_limits

        # A network this small gains nothing from BLAS threads, and the
        # ranks of the program share the node's cores with the simulation.
        threadpool_limits(1)
        self.inputs = inputs
        self.net = MLPRegressor(hidden_layer_sizes=tuple(hidden), activation="tanh", solver="adam",
                                learning_rate_init=rate, batch_size=256, random_state=seed)
        self.fitted = False

    def partial_fit(self, x: np.ndarray, y: np.ndarray) -> float:
        self.net.partial_fit(x, y)
        self.fitted = True
        return float(self.net.loss_)

    def predict(self, x: np.ndarray) -> np.ndarray:
        if not self.fitted:
            return np.zeros(len(x))
        return self.net.predict(x)

    def parameters(self) -> List[np.ndarray]:
        return list(self.net.coefs_) + list(self.net.intercepts_) if self.fitted else []

    def set_parameters(self, arrays: List[np.ndarray]) -> None:
        for mine, new in zip(self.parameters(), arrays):
            mine[...] = new


class TorchLearner:
    def __init__(self, inputs: int, hidden: Sequence[int], seed: int, rate: float) -> None:
        import torch

        self.torch = torch
        # A network this small gains nothing from threads, and the ranks
        # of the program share the node's cores with the simulation.
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        layers: list = []
        width = inputs
        for h in hidden:
            layers += [torch.nn.Linear(width, h), torch.nn.Tanh()]
            width = h
        layers.append(torch.nn.Linear(width, 1))
        self.net = torch.nn.Sequential(*layers).double()
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=rate)
        self.generator = torch.Generator().manual_seed(seed)

    def partial_fit(self, x: np.ndarray, y: np.ndarray) -> float:
        torch = self.torch
        xs, ys = torch.from_numpy(x), torch.from_numpy(y).unsqueeze(1)
        order = torch.randperm(len(xs), generator=self.generator)
        total = 0.0
        for start in range(0, len(xs), 256):
            batch = order[start:start + 256]
            self.optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(self.net(xs[batch]), ys[batch])
            loss.backward()
            self.optimizer.step()
            total += float(loss) * len(batch)
        return total / max(len(xs), 1) / 2  # scikit-learn's squared loss is half the MSE

    def predict(self, x: np.ndarray) -> np.ndarray:
        with self.torch.no_grad():
            return self.net(self.torch.from_numpy(x)).squeeze(1).numpy()

    def parameters(self) -> List[np.ndarray]:
        return [p.detach().numpy() for p in self.net.parameters()]

    def set_parameters(self, arrays: List[np.ndarray]) -> None:
        with self.torch.no_grad():
            for p, new in zip(self.net.parameters(), arrays):
                p.copy_(self.torch.from_numpy(new))


BACKENDS = {"sklearn": SklearnLearner, "torch": TorchLearner}


def make_learner(backend: str, inputs: int, hidden: Sequence[int], seed: int, rate: float):
    if backend not in BACKENDS:
        raise SystemExit(f"model: unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    try:
        return BACKENDS[backend](inputs, hidden, seed, rate)
    except ImportError as e:
        raise SystemExit(f"model: backend {backend!r} needs {e.name}, which is not installed "
                         f"(make deps installs scikit-learn; PyTorch: pip install torch)") from None
