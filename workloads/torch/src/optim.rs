//! AdamW as one fused kernel per step (libtorch's `_fused_adamw_`, what PyTorch's
//! `AdamW(fused=True)` runs) instead of tch's wrapper of libtorch's C++ AdamW, which launches
//! several kernels per parameter: on a 4-layer model that made the step launch-bound and
//! slower than PyTorch eager's multi-tensor AdamW (docs/benchmarks.md).

use tch::{Kind, Tensor};

extern "C" {
    fn aorta_fused_adamw(
        params: *const *mut torch_sys::C_tensor,
        grads: *const *mut torch_sys::C_tensor,
        exp_avgs: *const *mut torch_sys::C_tensor,
        exp_avg_sqs: *const *mut torch_sys::C_tensor,
        steps: *const *mut torch_sys::C_tensor,
        n: i32,
        lr: f64,
        beta1: f64,
        beta2: f64,
        weight_decay: f64,
        eps: f64,
        err: *mut std::ffi::c_char,
        errlen: i32,
    ) -> i32;
    fn aorta_clear_grads(params: *const *mut torch_sys::C_tensor, n: i32);
}

/// Decoupled weight decay Adam over a fixed parameter list, state kept per parameter.
pub struct FusedAdamW {
    params: Vec<Tensor>,
    exp_avgs: Vec<Tensor>,
    exp_avg_sqs: Vec<Tensor>,
    /// One float per parameter (the kernel reads each as a 0-dim tensor), counted up together.
    all_steps: Tensor,
    steps: Vec<Tensor>,
    pub lr: f64,
    pub betas: (f64, f64),
    pub weight_decay: f64,
    pub eps: f64,
}

fn ptr(t: &Tensor) -> *mut torch_sys::C_tensor {
    t.as_ptr() as *mut _
}

impl FusedAdamW {
    pub fn new(
        params: Vec<Tensor>,
        lr: f64,
        betas: (f64, f64),
        weight_decay: f64,
        eps: f64,
    ) -> Self {
        let _g = tch::no_grad_guard();
        let exp_avgs = params.iter().map(Tensor::zeros_like).collect();
        let exp_avg_sqs = params.iter().map(Tensor::zeros_like).collect();
        let device = params.first().map_or(tch::Device::Cpu, Tensor::device);
        let all_steps = Tensor::zeros([params.len() as i64], (Kind::Float, device));
        let steps = (0..params.len() as i64).map(|i| all_steps.get(i)).collect();
        FusedAdamW {
            params,
            exp_avgs,
            exp_avg_sqs,
            all_steps,
            steps,
            lr,
            betas,
            weight_decay,
            eps,
        }
    }

    /// Sets every gradient to none (no kernel; backward writes fresh ones).
    pub fn zero_grad(&mut self) {
        let ps: Vec<_> = self.params.iter().map(ptr).collect();
        // SAFETY: pointers to live tensors owned by self for the duration of the call.
        unsafe { aorta_clear_grads(ps.as_ptr(), ps.len() as i32) };
    }

    /// One step over the parameters that have a gradient (unrouted experts have none and keep
    /// their state, as in PyTorch).
    pub fn step(&mut self) -> Result<(), String> {
        let _g = tch::no_grad_guard();
        let grads: Vec<Tensor> = self.params.iter().map(Tensor::grad).collect();
        let with_grad: Vec<usize> = (0..self.params.len())
            .filter(|&i| grads[i].defined())
            .collect();
        if with_grad.is_empty() {
            return Ok(());
        }
        if with_grad.len() == self.params.len() {
            let _ = self.all_steps.g_add_scalar_(1.0);
        } else {
            for &i in &with_grad {
                let _ = self.steps[i].g_add_scalar_(1.0);
            }
        }
        let pick = |v: &[Tensor]| with_grad.iter().map(|&i| ptr(&v[i])).collect::<Vec<_>>();
        let (p, g, m, v, s) = (
            pick(&self.params),
            pick(&grads),
            pick(&self.exp_avgs),
            pick(&self.exp_avg_sqs),
            pick(&self.steps),
        );
        let mut err = vec![0u8; 1024];
        // SAFETY: five arrays of `n` pointers to live tensors; the shim writes at most errlen
        // bytes, NUL-terminated, into err.
        let rc = unsafe {
            aorta_fused_adamw(
                p.as_ptr(),
                g.as_ptr(),
                m.as_ptr(),
                v.as_ptr(),
                s.as_ptr(),
                p.len() as i32,
                self.lr,
                self.betas.0,
                self.betas.1,
                self.weight_decay,
                self.eps,
                err.as_mut_ptr().cast(),
                err.len() as i32,
            )
        };
        match rc {
            0 => Ok(()),
            _ => Err(std::ffi::CStr::from_bytes_until_nul(&err)
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two steps on the CPU against AdamW written out by hand.
    #[test]
    fn matches_the_adamw_formula() {
        let w0 = [0.5f32, -1.0, 2.0];
        let grads = [[0.1f32, -0.2, 0.3], [0.05, 0.4, -0.1]];
        let p = Tensor::from_slice(&w0).set_requires_grad(true);
        let (lr, b1, b2, wd, eps) = (0.01, 0.9, 0.999, 0.1, 1e-8);
        let mut opt = FusedAdamW::new(vec![p.shallow_clone()], lr, (b1, b2), wd, eps);
        let mut w: Vec<f64> = w0.iter().map(|&x| x as f64).collect();
        let (mut m, mut v) = (vec![0.0; 3], vec![0.0; 3]);
        for (t, g) in grads.iter().enumerate() {
            opt.zero_grad();
            assert!(!p.grad().defined(), "zero_grad drops the gradient");
            let target = Tensor::from_slice(g);
            (&p * &target).sum(Kind::Float).backward();
            opt.step().unwrap();
            let t = (t + 1) as i32;
            for i in 0..3 {
                let gi = g[i] as f64;
                w[i] *= 1.0 - lr * wd;
                m[i] = b1 * m[i] + (1.0 - b1) * gi;
                v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
                let (mh, vh) = (m[i] / (1.0 - b1.powi(t)), v[i] / (1.0 - b2.powi(t)));
                w[i] -= lr * mh / (vh.sqrt() + eps);
            }
        }
        let got: Vec<f32> = Vec::<f32>::try_from(&p.detach()).unwrap();
        for i in 0..3 {
            assert!(
                (got[i] as f64 - w[i]).abs() < 1e-6,
                "param {i}: {} vs {}",
                got[i],
                w[i]
            );
        }
    }

    #[test]
    fn parameters_without_a_gradient_keep_their_state() {
        let a = Tensor::from_slice(&[1.0f32]).set_requires_grad(true);
        let b = Tensor::from_slice(&[1.0f32]).set_requires_grad(true);
        let mut opt = FusedAdamW::new(
            vec![a.shallow_clone(), b.shallow_clone()],
            0.1,
            (0.9, 0.999),
            0.0,
            1e-8,
        );
        opt.zero_grad();
        (&a * 2.0).sum(Kind::Float).backward();
        opt.step().unwrap();
        assert_eq!(f64::try_from(&b.detach()).unwrap(), 1.0);
        assert!(f64::try_from(&a.detach()).unwrap() < 1.0);
        assert_eq!(
            Vec::<f32>::try_from(&opt.all_steps).unwrap(),
            vec![1.0, 0.0]
        );
    }
}
