//! Every capability, in the list's order (WASI before them): generated
//! from `list`.

use super::list::foreach_capability;
use super::sandbox::Linked;

macro_rules! linked {
    (sections: [$($(#[$sm:meta])* $skey:ident: $scap:path [$($g:ident)?]),* $(,)?],
     others: [$($(#[$om:meta])* $okey:ident: $ocap:path),* $(,)?] $(,)?) => {
        /// Every capability, in the list's order (WASI before them).
        pub(crate) static CAPABILITIES: &[Linked] = &[
            $($(#[$sm])* Linked::of::<$scap>(),)*
            $($(#[$om])* Linked::of::<$ocap>(),)*
        ];
    };
}
foreach_capability!(linked);
