"""gymnasium stand-in for the corpus runner: `make("CartPole-v1")`, the classic cart-pole task with gymnasium's
dynamics (Euler steps of 0.02 s, a 12-degree and 2.4-unit failure box, 500 steps then truncation, reward 1 a step,
reward threshold 475), its `reset(seed=...)` / `step(action)` API of five returns, and a NumPy generator seeded by
`reset`, so an episode is the same under webgrad and the real torch. Nothing renders."""

import math
from types import SimpleNamespace

import numpy as np

__version__ = "0.0-corpus-standin"


class CartPoleEnv:
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4

    def __init__(self, render_mode=None, max_episode_steps=500):
        self.render_mode = render_mode
        self.total_mass = self.masspole + self.masscart
        self.polemass_length = self.masspole * self.length
        self.max_episode_steps = max_episode_steps
        self.spec = SimpleNamespace(id="CartPole-v1", reward_threshold=475.0, max_episode_steps=max_episode_steps)
        self.action_space = SimpleNamespace(n=2)
        self.observation_space = SimpleNamespace(shape=(4,))
        self.np_random = np.random.default_rng()
        self.state, self.elapsed = None, 0

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.state = self.np_random.uniform(low=-0.05, high=0.05, size=(4,))
        self.elapsed = 0
        return np.array(self.state, dtype=np.float32), {}

    def step(self, action):
        if self.state is None:
            raise RuntimeError("Cannot call env.step() before calling env.reset()")
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if int(action) == 1 else -self.force_mag
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + self.polemass_length * theta_dot ** 2 * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta ** 2 / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * xacc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * thetaacc
        self.state = np.array((x, x_dot, theta, theta_dot), dtype=np.float64)
        self.elapsed += 1
        terminated = bool(x < -self.x_threshold or x > self.x_threshold
                          or theta < -self.theta_threshold_radians or theta > self.theta_threshold_radians)
        truncated = self.elapsed >= self.max_episode_steps
        return np.array(self.state, dtype=np.float32), 1.0, terminated, truncated, {}

    def render(self):
        return None

    def close(self):
        pass


def make(env_id, render_mode=None, **kwargs):
    if env_id not in ("CartPole-v1", "CartPole-v0"):
        raise ValueError(f"the corpus gymnasium stand-in has CartPole-v1 only, not {env_id!r}")
    return CartPoleEnv(render_mode=render_mode, max_episode_steps=500 if env_id == "CartPole-v1" else 200)
