//! TCP driver stub.
pub struct MpaConnection;
pub struct MpaListener;
pub fn connect() {}
pub fn listen() {}
