//! AdamW written over tensors, so that its moments can be saved beside the weights and a run
//! resumes exactly (tch's own optimizer cannot save them). Decoupled weight decay applies to
//! matrices only (norm gains are not decayed), as in nanoGPT.

use anyhow::{bail, Result};
use tch::{nn::VarStore, Kind, Tensor};

pub struct AdamW {
    /// (name, parameter, first moment, second moment), in the VarStore's name order.
    state: Vec<(String, Tensor, Tensor, Tensor)>,
    /// Number of updates applied so far.
    pub step: u64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

impl AdamW {
    pub fn new(vs: &VarStore, beta1: f64, beta2: f64, eps: f64, weight_decay: f64) -> AdamW {
        let mut vars: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        let state = vars
            .into_iter()
            .map(|(n, p)| {
                let (m, v) = (p.zeros_like(), p.zeros_like());
                (n, p, m, v)
            })
            .collect();
        AdamW { state, step: 0, beta1, beta2, eps, weight_decay }
    }

    /// Global L2 norm of the gradients; scales them down to `max_norm` if above. Returns the
    /// norm before clipping.
    pub fn clip_grad_norm(&self, max_norm: f64) -> f64 {
        let norms: Vec<Tensor> = self.state.iter().map(|(_, p, _, _)| p.grad().norm()).collect();
        let total = f64::try_from(Tensor::stack(&norms, 0).norm()).unwrap();
        if total > max_norm {
            let scale = max_norm / (total + 1e-6);
            tch::no_grad(|| {
                for (_, p, _, _) in &self.state {
                    let _ = p.grad().g_mul_scalar_(scale);
                }
            });
        }
        total
    }

    /// One update at learning rate `lr`, then zeroes the gradients.
    pub fn step(&mut self, lr: f64) {
        self.step += 1;
        let (b1, b2) = (self.beta1, self.beta2);
        let bc1 = 1.0 - b1.powi(self.step as i32);
        let bc2 = 1.0 - b2.powi(self.step as i32);
        tch::no_grad(|| {
            for (_, p, m, v) in self.state.iter_mut() {
                let mut g = p.grad();
                let _ = m.lerp_(&g, 1.0 - b1);
                let _ = v.g_mul_scalar_(b2).addcmul_(&(&g * (1.0 - b2)), &g);
                if p.dim() >= 2 && self.weight_decay > 0.0 {
                    let _ = p.g_mul_scalar_(1.0 - lr * self.weight_decay);
                }
                let denom = (v.divide_scalar(bc2)).sqrt().g_add_scalar_(self.eps);
                let _ = p.g_sub_(&(m.divide_scalar(bc1 / lr) / denom));
                let _ = g.zero_();
            }
        });
    }

    /// Moments as named tensors (`m.<param>`, `v.<param>`) plus the step count, for saving.
    pub fn named_state(&self) -> Vec<(String, Tensor)> {
        let mut out = vec![("step".to_string(), Tensor::from(self.step as i64))];
        for (n, _, m, v) in &self.state {
            out.push((format!("m.{n}"), m.shallow_clone()));
            out.push((format!("v.{n}"), v.shallow_clone()));
        }
        out
    }

    /// Restores moments saved by `named_state`; every parameter's moments must be present.
    pub fn load_state(&mut self, saved: Vec<(String, Tensor)>) -> Result<()> {
        // every tensor is checked before any is copied, so a bad file leaves the state as it was
        let saved: std::collections::HashMap<String, Tensor> = saved.into_iter().collect();
        let Some(step) = saved.get("step") else { bail!("optimizer state has no `step`") };
        let step = i64::try_from(step)? as u64;
        for (n, p, _, _) in &self.state {
            for prefix in ["m", "v"] {
                let key = format!("{prefix}.{n}");
                let Some(src) = saved.get(&key) else { bail!("optimizer state lacks `{key}`") };
                if src.size() != p.size() || src.kind() != Kind::Float {
                    bail!(
                        "optimizer state `{key}` has shape {:?} and dtype {:?}, the model has {:?} (Float)",
                        src.size(),
                        src.kind(),
                        p.size()
                    );
                }
            }
        }
        self.step = step;
        for (n, _, m, v) in self.state.iter_mut() {
            tch::no_grad(|| {
                m.copy_(&saved[&format!("m.{n}")]);
                v.copy_(&saved[&format!("v.{n}")]);
            });
        }
        Ok(())
    }
}
