// A memory region cannot be used after it was dropped (deregistered).
use rddp::{Access, Device, Quota};

fn main() {
    let pd = Device::new().consumer("x", Quota::default()).unwrap().alloc_pd().unwrap();
    let mr = pd.register(vec![0; 8], Access::REMOTE_WRITE).unwrap();
    drop(mr);
    let _ = mr.remote();
}
