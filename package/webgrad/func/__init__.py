"""webgrad.func, as torch.func: function transforms and functional modules.

- grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian (_autodiff.py): derivatives of functions of
  (pytrees of) tensors, by webgrad's reverse-mode engine; they nest (grad(grad(f)), hessian = jacfwd(jacrev)).
- vmap (_vmap.py, also webgrad.vmap): a function mapped over a dimension of its inputs, one call per slice.
  linearize (_autodiff.py): func's value and its jvp at fixed primals.
- functional_call, stack_module_state, replace_all_batch_norm_modules_ (_modules.py): a module run with given
  parameters and buffers, and an ensemble's stacked state, so vmap(grad(...)) gives per-sample gradients and
  vmap(functional_call) runs many models at once.
- functionalize, debug_unwrap (_eager.py): nothing to undo in eager webgrad.
"""

from ._autodiff import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize, vjp
from ._eager import debug_unwrap, functionalize
from ._modules import functional_call, replace_all_batch_norm_modules_, stack_module_state
from ._vmap import vmap

__all__ = ["debug_unwrap", "functional_call", "functionalize", "grad", "grad_and_value", "hessian", "jacfwd",
           "jacrev", "jvp", "linearize", "replace_all_batch_norm_modules_", "stack_module_state", "vjp", "vmap"]
