"""The structure of pytorch/examples time_sequence_prediction/train.py (two LSTMCells unrolled over a sine
wave in float64, LBFGS with a closure, predicting the future under no_grad, reading the result with
.cpu().detach().numpy()), written with PyTorch's API and run by tests/compat/test_example_scripts.py with
webgrad standing in for torch. The data are made here (the example reads a pickled NumPy array)."""

import numpy as np

import torch
import torch.nn as nn
import torch.optim as optim


class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)
        self.dummy_param = nn.Parameter(torch.empty(0))

    def forward(self, input, future=0):
        outputs = []
        device = self.dummy_param.device
        h_t = torch.zeros(input.size(0), 51, dtype=torch.double).to(device)
        c_t = torch.zeros(input.size(0), 51, dtype=torch.double).to(device)
        h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double).to(device)
        c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double).to(device)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


def sine_waves(n=6, length=24, period=20.0):
    rng = np.random.RandomState(2)
    x = np.arange(length) + rng.randint(-4 * period, 4 * period, n).reshape(n, 1)
    return np.sin(x / period).astype("float64")


def main(steps=2, device_name="cpu"):
    np.random.seed(0)
    torch.manual_seed(0)
    device = torch.device(device_name)
    data = torch.from_numpy(sine_waves()).to(device)
    input, target = data[3:, :-1], data[3:, 1:]
    test_input, test_target = data[:3, :-1], data[:3, 1:]
    seq = Sequence().to(device).double()
    criterion = nn.MSELoss().to(device)
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=8)
    test_losses = []
    for i in range(steps):
        print("STEP: ", i)

        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            print("loss:", loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        with torch.no_grad():
            future = 10
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print("test loss:", loss.item())
            test_losses.append(loss.item())
            y = pred.cpu().detach().numpy()
    return test_losses, y
